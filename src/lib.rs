#![doc = include_str!("../README.md")]

pub mod canonical;
pub mod evidence;
pub mod executor;
