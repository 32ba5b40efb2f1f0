//! The whole tree of processes a server command starts, held in a cgroup of its own.
//!
//! A process group is not a tree: any descendant can leave it (`setsid`, a daemonizing
//! double fork) and is then neither signalled with the group nor seen when the group is
//! checked. Membership of a cgroup (v2) passes to every child at `fork`, and a process
//! leaves only by writing to another cgroup's `cgroup.procs`, which takes write access
//! to the cgroup hierarchy (root, or a delegated subtree). The kernel lists a cgroup's
//! live members (`cgroup.procs`), says whether any is left (`populated` in
//! `cgroup.events`), kills them all at once (`cgroup.kill`), and refuses to remove a
//! cgroup while any member lives. So, from any process on the host and also after the
//! host that created it died, "the cgroup is empty, or removed" proves every process of
//! the tree gone.
//!
//! A cgroup is created where the host itself is, in the cgroup2 hierarchy it sees
//! (`/proc/self/cgroup`, `/proc/self/mountinfo`). Where none can be created (not Linux,
//! no cgroup2 mount, or no write access to it) the server runs without one, and its
//! carrier can never be shown gone.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::executor::CarrierCgroup;

/// A cgroup of its own for one server.
#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
    record: CarrierCgroup,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Where the next cgroup will be: a fresh name under the host's own cgroup. Planned
/// before it is created, so that its sentinel can be started first: a host that dies
/// between the two leaves nothing behind.
#[derive(Debug)]
pub(crate) struct Planned {
    parent: PathBuf,
    dir: PathBuf,
}

impl Planned {
    /// The next cgroup's place; `None` where no cgroup2 hierarchy shows the host's
    /// cgroup (see the module documentation).
    pub(crate) fn next() -> Option<Self> {
        if !cfg!(target_os = "linux") {
            return None;
        }
        let parent = own_cgroup_dir()?;
        let pid = std::process::id();
        // The host's pid, start and a counter: unique on this host for as long as the
        // host's pid is not reused, and a reused pid has another start.
        let name = format!(
            "{NAME_PREFIX}{pid}-{}-{}",
            super::process_start(pid).unwrap_or_default(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        Some(Self {
            dir: parent.join(name),
            parent,
        })
    }

    /// Its directory (not created yet).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the empty cgroup; `None` where it cannot be (no write access).
    pub(crate) fn create(self) -> Option<Cgroup> {
        let Self { parent, dir } = self;
        std::fs::create_dir(&dir).ok()?;
        let cgroup = (|| {
            let id = std::fs::metadata(&dir).ok()?.ino();
            let parent_id = std::fs::metadata(&parent).ok()?.ino();
            let path = dir.to_str()?.to_owned();
            Some(Cgroup {
                record: CarrierCgroup::new(path, id, parent_id),
                dir: dir.clone(),
            })
        })();
        if cgroup.is_none() {
            let _ = std::fs::remove_dir(&dir);
        }
        cgroup
    }
}

impl Cgroup {
    /// Creates an empty cgroup under the host's own cgroup; `None` where none can be
    /// created.
    #[cfg(test)]
    pub(crate) fn create() -> Option<Self> {
        Planned::next()?.create()
    }

    /// What the carrier record keeps of it.
    pub(crate) fn record(&self) -> &CarrierCgroup {
        &self.record
    }

    /// Its directory.
    #[cfg(test)]
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// `cgroup.procs`, opened for writing (close-on-exec): a process that writes `0` to
    /// it moves itself into the cgroup.
    pub(crate) fn procs_for_joining(&self) -> std::io::Result<File> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))
    }

    /// Whether no member is alive; `None` when that cannot be read.
    pub(crate) fn empty(&self) -> Option<bool> {
        populated(&self.dir).map(|p| !p)
    }

    /// Sends `signal` to every live member. The cgroup is frozen meanwhile (where the
    /// kernel can), so no member exits, and no listed pid is reused, between the listing
    /// and the signal.
    pub(crate) fn signal_all(&self, signal: Signal) {
        signal_members(&self.dir, signal);
    }

    /// Kills every member and waits until none is alive or `timeout` passes; whether the
    /// cgroup is empty.
    pub(crate) fn kill_and_wait(&self, timeout: Duration) -> bool {
        kill_and_wait(&self.dir, timeout)
    }

    /// Removes the cgroup if it is empty (the kernel refuses otherwise); whether it is
    /// gone.
    pub(crate) fn remove(&self) -> bool {
        remove_tree(&self.dir)
    }
}

/// The prefix of every cgroup rpr creates; nothing else is ever killed or removed.
const NAME_PREFIX: &str = "rpr-";

/// Removes the empty cgroup at `dir` with the empty cgroups below it (a host that ran
/// inside a server's cgroup leaves its own servers' cgroups there, and the kernel removes
/// a cgroup only once it has no child cgroup); whether `dir` is gone.
fn remove_tree(dir: &Path) -> bool {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The directory of this process's own cgroup in the cgroup2 hierarchy, if it is mounted
/// and the process's cgroup is visible under the mount.
fn own_cgroup_dir() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (root, point) = cgroup2_mount(line)?;
        let rel = if root == "/" {
            own
        } else {
            let rest = own.strip_prefix(root.as_str())?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            rest
        };
        let dir = Path::new(&point).join(rel.trim_start_matches('/'));
        dir.is_dir().then_some(dir)
    })
}

/// The root and mount point of a `/proc/self/mountinfo` line that mounts cgroup2.
fn cgroup2_mount(line: &str) -> Option<(String, String)> {
    // ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
    let (left, right) = line.split_once(" - ")?;
    if right.split_whitespace().next()? != "cgroup2" {
        return None;
    }
    let fields: Vec<&str> = left.split_whitespace().collect();
    Some((unescape(fields.get(3)?)?, unescape(fields.get(4)?)?))
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape(field: &str) -> Option<String> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            let code = std::str::from_utf8(bytes.get(i + 1..i + 4)?).ok()?;
            out.push(u8::from_str_radix(code, 8).ok()?);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Whether any member of the cgroup at `dir` is alive (`populated` in `cgroup.events`).
fn populated(dir: &Path) -> Option<bool> {
    let events = std::fs::read_to_string(dir.join("cgroup.events")).ok()?;
    events
        .lines()
        .find_map(|l| match l.strip_prefix("populated ")? {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })
}

/// The live members of the cgroup at `dir` (empty when it cannot be read).
fn members(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

fn signal_members(dir: &Path, signal: Signal) {
    let frozen = std::fs::write(dir.join("cgroup.freeze"), "1").is_ok();
    if frozen {
        let deadline = Instant::now() + Duration::from_millis(200);
        while !is_frozen(dir) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    for pid in members(dir) {
        if let Ok(raw) = i32::try_from(pid) {
            let _ = kill(Pid::from_raw(raw), signal);
        }
    }
    if frozen {
        let _ = std::fs::write(dir.join("cgroup.freeze"), "0");
    }
}

fn is_frozen(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .is_ok_and(|e| e.lines().any(|l| l == "frozen 1"))
}

/// Kills every member of the cgroup at `dir` (`cgroup.kill`; where the kernel has none,
/// `SIGKILL` to each listed member, frozen) and waits until it is empty or `timeout`
/// passes; whether it is empty.
fn kill_and_wait(dir: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        match populated(dir) {
            Some(false) => return true,
            None => return false,
            Some(true) => {}
        }
        if Instant::now() >= deadline {
            return false;
        }
        if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
            signal_members(dir, Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What settling a recorded cgroup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TreeFate {
    /// Every process of the tree is gone (the cgroup was empty, or was emptied now), and
    /// the cgroup is removed, or was already.
    Gone,
    /// Why the tree cannot be shown gone.
    MayBeAlive(String),
}

/// Kills whatever is left of the tree held in the recorded cgroup, waits up to
/// `timeout` for it to be gone, and removes the cgroup. Works from any process on the
/// host that created it, also after that host died.
///
/// The cgroup at the recorded path counts only if its id is the recorded one. A path
/// that is gone proves the tree gone only when its parent is there with the recorded
/// id: the kernel removes a cgroup only once no process is left in it, and the parent
/// shows that the path was looked up in the same hierarchy (not in another mount or
/// cgroup namespace that does not show it).
pub(crate) fn settle(record: &CarrierCgroup, timeout: Duration) -> TreeFate {
    let dir = Path::new(&record.path);
    let may_be_alive = |why: String| TreeFate::MayBeAlive(why);
    if !cfg!(target_os = "linux") {
        return may_be_alive(format!(
            "the cgroup {} that holds the server's processes cannot be inspected on this platform",
            record.path
        ));
    }
    // A record names a cgroup rpr created, never one above it (killing the root or the
    // host's own cgroup would reach processes that are not the carrier's).
    if !dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(NAME_PREFIX))
    {
        return may_be_alive(format!(
            "{} is not a cgroup rpr created for a server, so the server's processes cannot be shown gone",
            record.path
        ));
    }
    match std::fs::metadata(dir) {
        Ok(meta) => {
            if !is_cgroup2(dir) || meta.ino().to_string() != record.id {
                return may_be_alive(format!(
                    "{} is no longer the cgroup that held the server's processes (id {}), so they cannot be shown gone",
                    record.path, record.id
                ));
            }
            if !kill_and_wait(dir, timeout) {
                let left = members(dir);
                return may_be_alive(format!(
                    "{} process(es) of the server's tree (cgroup {}, pids {left:?}) are still alive after SIGKILL; a descendant may still hold the request",
                    left.len(),
                    record.path
                ));
            }
            // Empty: every process of the tree is gone. Removing it is housekeeping; a
            // concurrent remover may win.
            remove_tree(dir);
            TreeFate::Gone
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent_here = dir.parent().is_some_and(|p| {
                is_cgroup2(p)
                    && std::fs::metadata(p).is_ok_and(|m| m.ino().to_string() == record.parent)
            });
            if parent_here {
                TreeFate::Gone
            } else {
                may_be_alive(format!(
                    "the cgroup {} that held the server's processes is not visible from here (its parent is missing or another cgroup), so they cannot be shown gone",
                    record.path
                ))
            }
        }
        Err(e) => may_be_alive(format!(
            "the cgroup {} that holds the server's processes cannot be read ({e})",
            record.path
        )),
    }
}

/// Whether `dir` is in a cgroup2 file system.
fn is_cgroup2(dir: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        nix::sys::statfs::statfs(dir)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
pub(crate) mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;
    use std::time::Duration;

    use std::os::unix::fs::MetadataExt;

    use super::{Cgroup, TreeFate, cgroup2_mount, settle, unescape};
    use crate::executor::CarrierCgroup;

    #[test]
    fn reads_cgroup2_mounts_and_their_escapes() {
        let line =
            "35 24 0:30 / /sys/fs/cgroup/uni\\040fied rw,relatime shared:9 - cgroup2 cgroup2 rw";
        assert_eq!(
            cgroup2_mount(line),
            Some(("/".into(), "/sys/fs/cgroup/uni fied".into()))
        );
        let v1 = "36 24 0:31 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids";
        assert_eq!(cgroup2_mount(v1), None);
        for bad in ["", " - ", "1 2 3 - cgroup2", "\\", "a\\9", "a\\0"] {
            let _ = cgroup2_mount(bad);
            let _ = unescape(bad);
        }
        assert_eq!(unescape("a\\0"), None);
    }

    /// Starts `sh -c` in `cgroup`: it leaves its group and session through `setsid`
    /// and sleeps; the shell itself sleeps too.
    pub(crate) fn spawn_in(cgroup: &Cgroup) -> std::process::Child {
        let procs = cgroup.procs_for_joining().unwrap();
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "/usr/bin/setsid sleep 30 & sleep 30"]);
        #[expect(
            unsafe_code,
            reason = "the test joins the cgroup as the transport does"
        )]
        // SAFETY: the closure makes one `write(2)` on an open descriptor; no heap, lock
        // or stdio is touched between `fork` and `exec`.
        unsafe {
            cmd.pre_exec(move || {
                nix::unistd::write(&procs, b"0")
                    .map(drop)
                    .map_err(Into::into)
            });
        }
        cmd.spawn().unwrap()
    }

    /// Without a writable cgroup2 (a developer's container, say) a test of the tree has
    /// nothing to test and says so; under CI (`CI` set) that is a failure, not a pass.
    pub(crate) fn no_cgroup2_here() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no writable cgroup2 here, and CI must have one to test this"
        );
        eprintln!("no writable cgroup2 here: nothing to test");
    }

    #[test]
    fn kills_a_tree_that_left_its_group_and_removes_the_cgroup() {
        let Some(cgroup) = Cgroup::create() else {
            return no_cgroup2_here();
        };
        let mut child = spawn_in(&cgroup);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while super::members(cgroup.dir()).len() < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "the tree never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(cgroup.empty(), Some(false));
        let record = cgroup.record().clone();
        // No time to wait for the kill: the tree is still there, and the reason names
        // what lives.
        let TreeFate::MayBeAlive(why) = settle(&record, Duration::ZERO) else {
            panic!("a live tree was taken as gone")
        };
        assert!(
            why.contains("still alive") && why.contains(&record.path),
            "{why}"
        );
        assert_eq!(settle(&record, Duration::from_secs(5)), TreeFate::Gone);
        child.wait().unwrap();
        assert!(!cgroup.dir().exists(), "the empty cgroup is removed");
        // Gone for good: settling again finds it gone through its parent.
        assert_eq!(settle(&record, Duration::from_secs(1)), TreeFate::Gone);
    }

    #[test]
    fn an_empty_cgroup_is_removed_with_the_empty_cgroups_below_it() {
        let Some(cgroup) = Cgroup::create() else {
            return no_cgroup2_here();
        };
        // As a host running inside this cgroup leaves its own servers' cgroups.
        std::fs::create_dir(cgroup.dir().join("rpr-nested")).unwrap();
        std::fs::create_dir(cgroup.dir().join("rpr-nested").join("rpr-deeper")).unwrap();
        let record = cgroup.record().clone();
        assert_eq!(settle(&record, Duration::from_secs(1)), TreeFate::Gone);
        assert!(!cgroup.dir().exists());
    }

    #[test]
    fn a_cgroup_that_cannot_be_identified_proves_nothing() {
        let Some(cgroup) = Cgroup::create() else {
            return no_cgroup2_here();
        };
        let record = cgroup.record().clone();
        // Another id at the path: a different cgroup.
        let other = CarrierCgroup {
            id: "0".into(),
            ..record.clone()
        };
        assert!(matches!(
            settle(&other, Duration::from_secs(1)),
            TreeFate::MayBeAlive(_)
        ));
        // A missing path whose parent is not the recorded one.
        let elsewhere = CarrierCgroup {
            path: format!("{}-gone", record.path),
            parent: "0".into(),
            ..record.clone()
        };
        assert!(matches!(
            settle(&elsewhere, Duration::from_secs(1)),
            TreeFate::MayBeAlive(_)
        ));
        // A path outside any cgroup2 file system.
        let tmp = CarrierCgroup::new("/tmp/rpr-no-such-cgroup", 1, 1);
        assert!(matches!(
            settle(&tmp, Duration::from_secs(1)),
            TreeFate::MayBeAlive(_)
        ));
        let garbage = CarrierCgroup::new("", 1, 1);
        assert!(matches!(
            settle(&garbage, Duration::from_secs(1)),
            TreeFate::MayBeAlive(_)
        ));
        // A cgroup rpr did not create is never touched, even with its true ids: here the
        // parent of the server's cgroup, which holds this test.
        let parent = cgroup.dir().parent().unwrap();
        let above = CarrierCgroup::new(
            parent.to_str().unwrap(),
            std::fs::metadata(parent).unwrap().ino(),
            1,
        );
        let TreeFate::MayBeAlive(why) = settle(&above, Duration::from_secs(1)) else {
            panic!("a cgroup rpr did not create was settled")
        };
        assert!(why.contains("not a cgroup rpr created"), "{why}");
        assert!(cgroup.remove());
    }
}
