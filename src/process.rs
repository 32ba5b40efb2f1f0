//! The platform part of owner and carrier liveness: host name, process start times,
//! killing a recorded process group, the whole tree of a carrier ([`tree`]: a cgroup
//! of its own, and a [`sentinel`] that kills it when the host ends), and the one thread
//! every server is forked on ([`spawner`]).
//!
//! A process is identified by its pid **and its start time**, so a recycled pid is
//! never taken for the process that was recorded. The start time can only be read on
//! Linux (`/proc/PID/stat`, field 22: clock ticks since boot). Elsewhere
//! [`process_start`] is always `None` ([`START_TIME_READABLE`] is false), and callers
//! must treat liveness there as lease-only: a process whose start time cannot be read is
//! *unverifiable*, never "gone because unknown".

use std::time::Duration;

use crate::executor::CarrierCgroup;

pub(crate) mod sentinel;
pub(crate) mod spawner;
pub(crate) mod tree;

/// Whether [`process_start`] can read start times on this platform (Linux only).
pub(crate) const START_TIME_READABLE: bool = cfg!(target_os = "linux");

/// The host name from `gethostname(2)`, or `unknown-host` if it cannot be read or is
/// not UTF-8.
pub(crate) fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// The start time of the live process `pid` (clock ticks since boot, as text), or
/// `None` if there is no such process, it has exited (a zombie counts as exited: it
/// holds nothing, even while its parent has not reaped it), or the platform cannot
/// tell (everywhere but Linux).
pub(crate) fn process_start(pid: u32) -> Option<String> {
    linux::stat(pid)
        .filter(|s| s.alive)
        .map(|s| s.start.to_string())
}

/// Whether the process recorded as `pid` with start time `start` (as [`process_start`]
/// gave it) still lives: `Some(true)` alive; `Some(false)` proven gone (no process has that
/// pid, the one that has it started at another time, or it exited); `None` when that
/// cannot be read: not Linux, or `/proc` hides or refuses the process (`hidepid`, a
/// security module, no file descriptor left) while a process with that pid exists. An
/// unreadable process is unverifiable, never "gone because unknown".
pub(crate) fn recorded_process_alive(pid: u32, start: &str) -> Option<bool> {
    if !START_TIME_READABLE {
        return None;
    }
    liveness(
        std::fs::read_to_string(format!("/proc/{pid}/stat")),
        || linux::exists(pid),
        || {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .ok()
                .map(Iterator::count)
        },
        start,
    )
}

/// [`recorded_process_alive`]'s rule over what was read: the stat file, whether a
/// process with the pid exists (`kill(pid, 0)`: `Some(false)` only for `ESRCH`), and how
/// many threads its task directory lists.
fn liveness(
    stat_file: std::io::Result<String>,
    exists: impl FnOnce() -> Option<bool>,
    threads: impl FnOnce() -> Option<usize>,
    recorded_start: &str,
) -> Option<bool> {
    let Ok(text) = stat_file else {
        // No stat to read: only the kernel's "no such process" proves it gone.
        return match exists() {
            Some(false) => Some(false),
            _ => None,
        };
    };
    let stat = linux::parse(&text)?;
    if stat.start.to_string() != recorded_start {
        return Some(false);
    }
    if stat.alive {
        return Some(true);
    }
    // A zombie leader whose other threads still run is alive (its task directory lists
    // them); a zombie alone holds nothing.
    threads().map(|n| n > 1)
}

/// This boot of this machine (`/proc/sys/kernel/random/boot_id`, a random id the kernel
/// makes at each boot), or `None` where it cannot be read. Containers on one machine share
/// it; a pid means the same process only within one boot *and* one PID namespace.
pub(crate) fn boot_id() -> Option<String> {
    if !START_TIME_READABLE {
        return None;
    }
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = text.trim();
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
        .then(|| id.to_owned())
}

/// The PID namespace this process's pids are numbered in (the inode of
/// `/proc/self/ns/pid`), or `None` where it cannot be read, or where the mounted `/proc`
/// numbers processes in another namespace than this process's (`/proc/self` does not name
/// this process's pid): a pid read there would mean another process.
pub(crate) fn pid_namespace() -> Option<String> {
    if !START_TIME_READABLE {
        return None;
    }
    let me = std::fs::read_link("/proc/self").ok()?;
    if me.to_str()? != std::process::id().to_string() {
        return None;
    }
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let inode = link.to_str()?.strip_prefix("pid:[")?.strip_suffix(']')?;
    inode
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| inode.to_owned())
}

/// What [`kill_group_and_wait`] found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupFate {
    /// No process of the recorded group was alive to begin with.
    Gone,
    /// Some were alive; all were sent `SIGKILL` and none is alive any more.
    Killed,
    /// Some are still alive when the timeout passed (for example in uninterruptible
    /// sleep).
    StillAlive,
    /// The group cannot be identified: not Linux, or the recorded start is empty or
    /// not a number.
    Unverifiable,
}

/// Kills every live process of the process group `pgid` that the recorded leader could
/// have started, and waits until none is alive or `timeout` passes.
///
/// A member is a live (not zombie) process whose process group is `pgid` and whose
/// start time is at or after `leader_start`, the start time recorded for the group's
/// leader (the leader's pid is `pgid`). A process group id stays allocated while any
/// member lives, so a surviving member of the recorded group is found; a process that
/// started before the leader cannot belong to it and is never signalled. If the pid
/// `pgid` now belongs to a process with another start time, the recorded group is gone
/// entirely (its id was free to be reused) and nothing is signalled.
///
/// Each member is checked again (group and start time) right before its `SIGKILL`.
/// Off Linux this returns [`GroupFate::Unverifiable`] without signalling anything.
pub(crate) fn kill_group_and_wait(pgid: u32, leader_start: &str, timeout: Duration) -> GroupFate {
    if !START_TIME_READABLE {
        return GroupFate::Unverifiable;
    }
    let Ok(leader_start) = leader_start.parse::<u64>() else {
        return GroupFate::Unverifiable;
    };
    let deadline = std::time::Instant::now() + timeout;
    let mut killed_any = false;
    loop {
        let members = linux::members(pgid, leader_start);
        if members.is_empty() {
            return if killed_any {
                GroupFate::Killed
            } else {
                GroupFate::Gone
            };
        }
        if std::time::Instant::now() >= deadline {
            return GroupFate::StillAlive;
        }
        for member in members {
            killed_any |= linux::kill_member(member, pgid, leader_start);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills whatever is left of a carrier on this host and tells whether every process
/// that may hold its request is gone: `Ok(())` when it is proven, otherwise why not.
///
/// The carrier is the whole tree of processes its command started. With a recorded
/// `cgroup`, that tree is the cgroup's members ([`tree::settle`]). Without one (a record
/// stored before trees were tracked, or a host that could not create a cgroup), the
/// recorded process group (`pgid`, leader started at `leader_start`) is killed and
/// waited for as before, but that never proves the tree gone: a descendant that left the
/// group (`setsid`, a daemonizing fork) is neither signalled nor seen.
pub(crate) fn settle_carrier(
    pgid: u32,
    leader_start: &str,
    cgroup: Option<&CarrierCgroup>,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(cgroup) = cgroup {
        return match tree::settle(cgroup, timeout) {
            tree::TreeFate::Gone => Ok(()),
            tree::TreeFate::MayBeAlive(why) => Err(why),
        };
    }
    let group = match kill_group_and_wait(pgid, leader_start, timeout) {
        GroupFate::Gone | GroupFate::Killed => format!("its process group {pgid} is gone"),
        GroupFate::StillAlive => {
            format!("its process group {pgid} still has live processes after SIGKILL")
        }
        GroupFate::Unverifiable => {
            format!("its process group {pgid} cannot be inspected on this platform")
        }
    };
    Err(format!(
        "the server's process tree was not tracked (no cgroup was recorded for it): {group}, but a descendant that left that group (setsid, a daemonizing fork) cannot be shown gone and may still hold the request; attest once no process of the server is left"
    ))
}

/// Whether any process of the recorded group (as [`kill_group_and_wait`] defines it) is
/// alive; `None` when that cannot be established (not Linux, or `leader_start` is empty
/// or not a number).
#[cfg(test)]
pub(crate) fn group_alive(pgid: u32, leader_start: &str) -> Option<bool> {
    if !START_TIME_READABLE {
        return None;
    }
    let leader_start = leader_start.parse::<u64>().ok()?;
    Some(!linux::members(pgid, leader_start).is_empty())
}

#[cfg(target_os = "linux")]
mod linux {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    /// The fields of `/proc/PID/stat` that liveness needs.
    #[derive(Debug, Clone, Copy)]
    pub(super) struct Stat {
        /// Neither zombie nor dead.
        pub(super) alive: bool,
        /// Field 5, the process group.
        pub(super) pgrp: u32,
        /// Field 22, the start time in clock ticks since boot.
        pub(super) start: u64,
    }

    pub(super) fn stat(pid: u32) -> Option<Stat> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        parse(&text)
    }

    /// Whether a process with `pid` exists, by `kill(pid, 0)`: `Some(false)` only when the
    /// kernel says there is none (`ESRCH`); `Some(true)` when it may be signalled or exists
    /// under another user (`EPERM`); `None` for anything else.
    pub(super) fn exists(pid: u32) -> Option<bool> {
        let pid = Pid::from_raw(i32::try_from(pid).ok()?);
        match kill(pid, None) {
            Ok(()) | Err(nix::errno::Errno::EPERM) => Some(true),
            Err(nix::errno::Errno::ESRCH) => Some(false),
            Err(_) => None,
        }
    }

    /// Whether start times read through `/proc` here are the initial time namespace's:
    /// this process's boot-time offset (`/proc/self/timens_offsets`) is zero, or the
    /// kernel has no time namespaces (no such file). The kernel moves every start time it
    /// shows by the *reader's* boot-time offset, so a process in a time namespace whose
    /// boot time is moved would record its own start as one that no process outside has,
    /// and would see every other process's start moved: a live owner judged gone. Such a
    /// process reads no start time at all (unverifiable, never "gone"). Read once: a
    /// process's own time namespace does not change.
    fn boottime_unshifted() -> bool {
        static UNSHIFTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *UNSHIFTED.get_or_init(
            || match std::fs::read_to_string("/proc/self/timens_offsets") {
                Ok(text) => offsets_are_zero(&text),
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            },
        )
    }

    /// Whether `/proc/self/timens_offsets` text gives a boot-time offset of zero (a
    /// `boottime` line with seconds and nanoseconds both 0).
    pub(super) fn offsets_are_zero(text: &str) -> bool {
        text.lines().any(|line| {
            let mut words = line.split_whitespace();
            words.next() == Some("boottime")
                && words.next() == Some("0")
                && words.next() == Some("0")
                && words.next().is_none()
        })
    }

    pub(super) fn parse(text: &str) -> Option<Stat> {
        if !boottime_unshifted() {
            return None;
        }
        // Fields count from after the ")" that closes the command name (which may
        // itself contain spaces and parentheses): state is field 3.
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Field 3 (state): a zombie (Z) or dead (X, x) process has exited.
        let alive = !matches!(*fields.first()?, "Z" | "X" | "x");
        Some(Stat {
            alive,
            pgrp: fields.get(2)?.parse().ok()?,
            start: fields.get(19)?.parse().ok()?,
        })
    }

    /// Whether `stat` describes a live member of the group recorded as (`pgid`,
    /// `leader_start`).
    fn is_member(stat: Stat, pgid: u32, leader_start: u64) -> bool {
        stat.alive && stat.pgrp == pgid && stat.start >= leader_start
    }

    /// The pids of the live members of the recorded group.
    pub(super) fn members(pgid: u32, leader_start: u64) -> Vec<u32> {
        // The group's id is its leader's pid; while any member lives, that pid is not
        // given to another process. A process holding it with another start time means
        // the recorded group is gone and the id was reused.
        if stat(pgid).is_some_and(|leader| leader.start != leader_start) {
            return Vec::new();
        }
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| stat(pid).is_some_and(|s| is_member(s, pgid, leader_start)))
            .collect()
    }

    /// Sends `SIGKILL` to `pid` if it is still a live member; whether it was sent.
    pub(super) fn kill_member(member: u32, pgid: u32, leader_start: u64) -> bool {
        if !stat(member).is_some_and(|s| is_member(s, pgid, leader_start)) {
            return false;
        }
        let Ok(raw) = i32::try_from(member) else {
            return false;
        };
        kill(Pid::from_raw(raw), Signal::SIGKILL).is_ok()
    }

    #[cfg(test)]
    mod tests {
        use super::{offsets_are_zero, parse};

        #[test]
        fn only_a_zero_boot_time_offset_reads_as_zero() {
            assert!(offsets_are_zero("monotonic 0 0\nboottime 0 0\n"));
            assert!(offsets_are_zero(
                "monotonic           0         0\nboottime            0         0\n"
            ));
            assert!(!offsets_are_zero("monotonic 0 0\nboottime 100000 0\n"));
            assert!(!offsets_are_zero("boottime -5 0\n"));
            assert!(!offsets_are_zero("boottime 0 1\n"));
            assert!(!offsets_are_zero("monotonic 0 0\n"));
            assert!(!offsets_are_zero(""));
        }

        #[test]
        fn parses_a_command_name_with_spaces_and_parentheses() {
            let line = "42 (a b) (c)) S 1 40 40 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 777 0 0";
            let stat = parse(line).unwrap();
            assert!(stat.alive);
            assert_eq!(stat.pgrp, 40);
            assert_eq!(stat.start, 777);
            let zombie = line.replace(")) S", ")) Z");
            assert!(!parse(&zombie).unwrap().alive);
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod linux {
    //! Start times cannot be read here: nothing is ever found alive or signalled, and
    //! the public functions report that liveness is unverifiable.

    #[derive(Debug, Clone, Copy)]
    pub(super) struct Stat {
        pub(super) alive: bool,
        pub(super) start: u64,
    }

    pub(super) fn stat(_pid: u32) -> Option<Stat> {
        None
    }

    pub(super) fn parse(_text: &str) -> Option<Stat> {
        None
    }

    pub(super) fn exists(_pid: u32) -> Option<bool> {
        None
    }

    pub(super) fn members(_pgid: u32, _leader_start: u64) -> Vec<u32> {
        Vec::new()
    }

    pub(super) fn kill_member(_member: u32, _pgid: u32, _leader_start: u64) -> bool {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    use super::{
        GroupFate, group_alive, kill_group_and_wait, liveness, process_start,
        recorded_process_alive,
    };

    /// A process `/proc` will not show (`hidepid`, a security module) is not proven gone:
    /// only the kernel's "no such process" (`ESRCH`) or a readable stat of another
    /// process, or of an exited one, is.
    #[test]
    fn a_process_proc_will_not_show_is_unverifiable_not_gone() {
        let hidden = || Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        let missing = || Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        let never = || -> Option<usize> { panic!("no stat, no threads to count") };
        // hidepid: ENOENT or EACCES for a process that exists (kill says EPERM or Ok).
        assert_eq!(liveness(missing(), || Some(true), never, "7"), None);
        assert_eq!(liveness(hidden(), || Some(true), never, "7"), None);
        assert_eq!(liveness(hidden(), || None, never, "7"), None);
        // No such process at all.
        assert_eq!(liveness(missing(), || Some(false), never, "7"), Some(false));
        let stat = |state: &str, start: u64| {
            Ok(format!(
                "42 (a b) {state} 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0"
            ))
        };
        let unasked = || -> Option<bool> { panic!("the stat was read") };
        assert_eq!(liveness(stat("S", 7), unasked, never, "7"), Some(true));
        // The pid now names another process.
        assert_eq!(liveness(stat("S", 8), unasked, never, "7"), Some(false));
        // A zombie leader: alive while other threads run, else gone.
        assert_eq!(liveness(stat("Z", 7), unasked, || Some(3), "7"), Some(true));
        assert_eq!(
            liveness(stat("Z", 7), unasked, || Some(1), "7"),
            Some(false)
        );
        assert_eq!(liveness(stat("Z", 7), unasked, || None, "7"), None);
    }

    #[test]
    fn this_process_is_alive_and_an_exited_child_is_gone() {
        let me = std::process::id();
        let start = process_start(me).unwrap();
        assert_eq!(recorded_process_alive(me, &start), Some(true));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        let child_start = process_start(pid).unwrap_or_else(|| "1".into());
        child.wait().unwrap();
        assert_eq!(recorded_process_alive(pid, &child_start), Some(false));
    }

    /// Spawns `sh -c 'sleep 30 & sleep 30'` in a new process group: a leader with a
    /// child and a grandchild-like background job, all in the group.
    fn spawn_group() -> Child {
        Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30"])
            .process_group(0)
            .spawn()
            .unwrap()
    }

    /// The pids whose process group is `pgid`, alive or not yet reaped.
    fn pids_in_group(pgid: u32) -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| super::linux::stat(pid).is_some_and(|s| s.alive && s.pgrp == pgid))
            .collect()
    }

    fn wait_for_members(pgid: u32, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while pids_in_group(pgid).len() < count {
            assert!(
                Instant::now() < deadline,
                "the group never had {count} members"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills the leader's group for good (`start` is the leader's real start) and reaps
    /// the leader.
    fn kill_and_reap(mut leader: Child, start: &str) {
        assert_eq!(
            kill_group_and_wait(leader.id(), start, Duration::from_secs(5)),
            GroupFate::Killed
        );
        leader.wait().unwrap();
    }

    #[test]
    fn kills_a_whole_group_with_its_grandchildren_then_finds_it_gone() {
        let mut leader = spawn_group();
        let pgid = leader.id();
        let start = process_start(pgid).unwrap();
        // sh, and the two sleeps (one is sh's child in the background, one in front).
        wait_for_members(pgid, 3);
        let members = pids_in_group(pgid);
        assert_eq!(group_alive(pgid, &start), Some(true));

        let fate = kill_group_and_wait(pgid, &start, Duration::from_secs(5));
        assert_eq!(fate, GroupFate::Killed);
        for pid in members {
            assert_eq!(process_start(pid), None, "process {pid} survived");
        }
        assert_eq!(group_alive(pgid, &start), Some(false));
        // Nothing is left to kill: a second call finds the group gone, also while the
        // leader is an unreaped zombie.
        assert_eq!(
            kill_group_and_wait(pgid, &start, Duration::from_secs(5)),
            GroupFate::Gone
        );
        leader.wait().unwrap();
        assert_eq!(
            kill_group_and_wait(pgid, &start, Duration::from_secs(5)),
            GroupFate::Gone
        );
    }

    #[test]
    fn a_group_recorded_with_a_later_leader_start_is_not_touched() {
        let leader = spawn_group();
        let pgid = leader.id();
        let start: u64 = process_start(pgid).unwrap().parse().unwrap();
        wait_for_members(pgid, 3);
        let members = pids_in_group(pgid);
        // As if the pgid had been recycled: the record names a leader that started
        // after every process now in the group.
        let later = (start + 1_000_000).to_string();
        assert_eq!(group_alive(pgid, &later), Some(false));
        assert_eq!(
            kill_group_and_wait(pgid, &later, Duration::from_secs(1)),
            GroupFate::Gone
        );
        for pid in &members {
            assert!(process_start(*pid).is_some(), "process {pid} was hit");
        }
        kill_and_reap(leader, &start.to_string());
    }

    #[test]
    fn an_unparseable_leader_start_is_unverifiable() {
        let leader = spawn_group();
        let pgid = leader.id();
        for start in ["", "abc", "-1"] {
            assert_eq!(group_alive(pgid, start), None);
            assert_eq!(
                kill_group_and_wait(pgid, start, Duration::from_secs(1)),
                GroupFate::Unverifiable
            );
        }
        assert!(process_start(pgid).is_some(), "the group was hit");
        kill_and_reap(leader, &process_start(pgid).unwrap());
    }

    #[test]
    fn hostname_is_the_kernel_hostname() {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(super::hostname(), kernel.trim());
    }
}
