//! A local-file executor: writes one file inside a root, atomically, and reads it back.
//!
//! The request is `write_file` with arguments `{"path": "<relative path>", "content": "<text>"}`.
//! Its binding is of class [`ActionClass::Mutating`](crate::ActionClass): it writes.
//! Before anything is written, [`FileExecutor::prepare`] refuses a path that is
//! absolute, contains `..`, passes through a symbolic link, or names a symbolic link,
//! and content larger than the configured maximum. [`Executor::execute`] writes a
//! temporary file in the same directory, `fsync`s it, renames it over the target and
//! `fsync`s the directory, all in the host process (so [`Executor::carrier`] is
//! `None`: no other process carries the write). [`FileReadback`] compares the file's
//! sha256 with the content's.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use super::{Binding, Delivery, Executor, Observation, Readback, Refusal, Request};
use crate::canonical::sha256_hex_bytes;
use crate::pathway::ActionClass;

/// The action name this executor accepts.
pub const WRITE_FILE: &str = "write_file";

/// Writes files inside one root directory.
#[derive(Debug, Clone)]
pub struct FileExecutor {
    root: PathBuf,
    max_bytes: usize,
}

/// The parts of a valid `write_file` request.
struct WriteRequest<'a> {
    relative: PathBuf,
    content: &'a str,
}

fn parse(request: &Request, max_bytes: usize) -> Result<WriteRequest<'_>, Refusal> {
    if request.action != WRITE_FILE {
        return Err(Refusal::new(
            "unsupported_action",
            format!(
                "the file executor only runs `{WRITE_FILE}`, not `{}`",
                request.action
            ),
        ));
    }
    let path = request
        .arguments
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::new("invalid_arguments", "`path` must be a string"))?;
    let content = request
        .arguments
        .get("content")
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::new("invalid_arguments", "`content` must be a string"))?;
    if content.len() > max_bytes {
        return Err(Refusal::new(
            "too_large",
            format!(
                "content is {} bytes, more than the limit of {max_bytes}",
                content.len()
            ),
        ));
    }
    let relative = PathBuf::from(path);
    if path.is_empty()
        || relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(Refusal::new(
            "path_escape",
            format!("`{path}` must be a relative path without `..`, `.` or a root"),
        ));
    }
    Ok(WriteRequest { relative, content })
}

impl FileExecutor {
    /// An executor for files under `root` (which must exist), with a 16 MiB content limit.
    pub fn new(root: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(Self {
            root: fs::canonicalize(root)?,
            max_bytes: 16 * 1024 * 1024,
        })
    }

    /// Sets the content limit in bytes.
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The canonical root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `relative` under the root, refusing any symbolic link on the way.
    fn resolve(&self, relative: &Path) -> Result<PathBuf, Refusal> {
        let mut at = self.root.clone();
        let parts: Vec<_> = relative.components().collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            match fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(Refusal::new(
                        "symlink",
                        format!(
                            "`{}` is a symbolic link; the file executor never follows links",
                            at.display()
                        ),
                    ));
                }
                Ok(m) if i + 1 < parts.len() && !m.is_dir() => {
                    return Err(Refusal::new(
                        "not_a_directory",
                        format!("`{}` is not a directory", at.display()),
                    ));
                }
                Ok(m) if i + 1 == parts.len() && m.is_dir() => {
                    return Err(Refusal::new(
                        "is_a_directory",
                        format!("`{}` is a directory", at.display()),
                    ));
                }
                Ok(_) => {}
                Err(_) if i + 1 == parts.len() => {}
                Err(e) => {
                    return Err(Refusal::new(
                        "missing_directory",
                        format!("`{}`: {e}", at.display()),
                    ));
                }
            }
        }
        Ok(at)
    }

    fn binding(&self) -> Result<Binding, Refusal> {
        // Every request this executor runs writes a file.
        Binding::new(
            format!("file:{}", self.root.display()),
            json!({"executor": "local-file", "root": self.root.display().to_string(), "max_bytes": self.max_bytes}),
        )
        .map(|binding| binding.with_class(ActionClass::Mutating))
        .map_err(|e| Refusal::new("binding", e.to_string()))
    }
}

impl Executor for FileExecutor {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        parse(request, self.max_bytes)?;
        self.binding()
    }

    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal> {
        if self.binding()?.digest != binding.digest {
            return Err(Refusal::new(
                "binding_changed",
                "the executor's root or limits changed since binding",
            ));
        }
        let req = parse(request, self.max_bytes)?;
        self.resolve(&req.relative).map(|_| ())
    }

    // `carrier` is the default `None`: the write happens in this process, so no other
    // process can carry it on after the host is gone.

    fn execute(&mut self, request: &Request) -> Delivery {
        let (req, target) = match parse(request, self.max_bytes).and_then(|r| {
            let t = self.resolve(&r.relative)?;
            Ok((r, t))
        }) {
            Ok(v) => v,
            Err(e) => {
                return Delivery::NothingWritten {
                    reason: e.to_string(),
                };
            }
        };
        let dir = target.parent().unwrap_or(&self.root).to_owned();
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.rpr-tmp-{}", std::process::id()));
        let written = (|| -> std::io::Result<()> {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            f.write_all(req.content.as_bytes())?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Delivery::NothingWritten {
                reason: format!("temporary file: {e}"),
            };
        }
        if let Err(e) = fs::rename(&tmp, &target) {
            let _ = fs::remove_file(&tmp);
            return Delivery::NothingWritten {
                reason: format!("rename: {e}"),
            };
        }
        // The target is replaced; only its durability is in question now.
        if let Err(e) = File::open(&dir).and_then(|d| d.sync_all()) {
            return Delivery::PossiblyWritten {
                reason: format!("replaced, but fsync of the directory failed: {e}"),
            };
        }
        Delivery::Succeeded {
            reply: json!({
                "path": req.relative.display().to_string(),
                "bytes": req.content.len(),
                "sha256": sha256_hex_bytes(req.content.as_bytes()),
            }),
        }
    }
}

/// Reads a file written by [`FileExecutor`] back and compares its sha256.
#[derive(Debug, Clone)]
pub struct FileReadback {
    executor: FileExecutor,
}

impl FileReadback {
    /// A readback over the same root as `executor`.
    #[must_use]
    pub fn new(executor: &FileExecutor) -> Self {
        Self {
            executor: executor.clone(),
        }
    }
}

impl Readback for FileReadback {
    fn observe(&mut self, request: &Request) -> Observation {
        let req = match parse(request, usize::MAX) {
            Ok(r) => r,
            Err(e) => {
                return Observation::Inconclusive {
                    evidence: json!({"error": e.to_string()}),
                };
            }
        };
        let path = match self.executor.resolve(&req.relative) {
            Ok(p) => p,
            Err(e) => {
                return Observation::Inconclusive {
                    evidence: json!({"error": e.to_string()}),
                };
            }
        };
        let expected = sha256_hex_bytes(req.content.as_bytes());
        match fs::read(&path) {
            Ok(bytes) => {
                let found = sha256_hex_bytes(&bytes);
                let evidence = json!({"path": req.relative.display().to_string(), "expected_sha256": expected,
                                      "found_sha256": found, "bytes": bytes.len()});
                if found == expected {
                    Observation::Applied { evidence }
                } else {
                    Observation::NotApplied { evidence }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Observation::NotApplied {
                evidence: json!({"path": req.relative.display().to_string(), "expected_sha256": expected, "found": null}),
            },
            Err(e) => Observation::Inconclusive {
                evidence: json!({"error": e.to_string()}),
            },
        }
    }
}
