//! The user pfprof acts for. Run through `sudo`, pfprof keeps root for the
//! perf events but the profiled command runs as the invoking user, and the
//! files pfprof writes belong to that user (as `perf` and `rr` behave):
//! they are created here, never through a link or over an existing file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use crate::sys;

/// The user who ran `sudo pfprof ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoker {
    /// `SUDO_UID`.
    pub uid: u32,
    /// `SUDO_GID`.
    pub gid: u32,
    /// `SUDO_USER`, for the supplementary groups (`initgroups`).
    pub name: Option<String>,
}

/// The invoking user when pfprof runs as root under `sudo` (`SUDO_UID` and
/// `SUDO_GID` set and valid, and not root themselves); None otherwise.
pub fn invoking_user() -> Option<Invoker> {
    if sys::euid() != 0 {
        return None;
    }
    from_env(
        std::env::var("SUDO_UID").ok().as_deref(),
        std::env::var("SUDO_GID").ok().as_deref(),
        std::env::var("SUDO_USER").ok().as_deref(),
    )
}

fn from_env(uid: Option<&str>, gid: Option<&str>, name: Option<&str>) -> Option<Invoker> {
    let uid: u32 = uid?.trim().parse().ok()?;
    let gid: u32 = gid?.trim().parse().ok()?;
    if uid == 0 {
        return None;
    }
    Some(Invoker {
        uid,
        gid,
        name: name
            .filter(|n| !n.is_empty() && !n.contains('\0'))
            .map(str::to_string),
    })
}

/// Who may own what pfprof reads as its user's or writes into (a perf map
/// in `/tmp`, anyone's to write; a build-id cache): root, the user pfprof
/// runs as, and the user who ran `sudo pfprof`.
pub fn trusted_owners() -> Vec<u32> {
    let mut owners = vec![0, sys::euid()];
    owners.extend(invoking_user().map(|u| u.uid));
    owners
}

/// Whether `uid` is one of the [`trusted_owners`].
pub fn is_trusted_owner(uid: u32) -> bool {
    trusted_owners().contains(&uid)
}

/// Gives what pfprof creates to the user who ran `sudo pfprof`.
pub fn give_to_invoker(file: &File) -> io::Result<()> {
    match invoking_user() {
        Some(u) => std::os::unix::fs::fchown(file, Some(u.uid), Some(u.gid)),
        None => Ok(()),
    }
}

/// Gives a directory pfprof created to the invoking user.
pub fn give_dir_to_invoker(path: &Path) -> io::Result<()> {
    match invoking_user() {
        // lchown: a directory that became a link is not followed.
        Some(u) => std::os::unix::fs::lchown(path, Some(u.uid), Some(u.gid)),
        None => Ok(()),
    }
}

/// Creates a new file at `path`: fails if anything is there, a link
/// included (`O_EXCL|O_NOFOLLOW`); `mode` before the umask.
pub fn create_new_file(path: &Path, mode: u32) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    give_to_invoker(&file)?;
    Ok(file)
}

/// Creates the directory `path` (not its parents); fails if anything is there.
pub fn create_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o755).create(path)?;
    give_dir_to_invoker(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Root and pfprof's own user are trusted owners, a stranger is not.
    #[test]
    fn trusted_owners_are_root_and_us() {
        assert!(is_trusted_owner(0));
        assert!(is_trusted_owner(sys::euid()));
        let stranger = 4_000_000_000;
        assert!(!trusted_owners().contains(&stranger) && !is_trusted_owner(stranger));
    }

    /// Only complete, numeric, non-root sudo variables name an invoker.
    #[test]
    fn sudo_variables() {
        let user = |uid, gid, name: Option<&str>| Invoker {
            uid,
            gid,
            name: name.map(str::to_string),
        };
        let cases = [
            (
                (Some("1000"), Some("1000"), Some("ann")),
                Some(user(1000, 1000, Some("ann"))),
            ),
            ((Some("1000"), Some("50"), None), Some(user(1000, 50, None))),
            (
                (Some("1000"), Some("50"), Some("")),
                Some(user(1000, 50, None)),
            ),
            ((Some("0"), Some("0"), Some("root")), None),
            ((Some("1000"), None, Some("ann")), None),
            ((None, Some("1000"), Some("ann")), None),
            ((Some("x"), Some("1000"), None), None),
            ((Some("-1"), Some("1000"), None), None),
        ];
        for ((uid, gid, name), want) in cases {
            assert_eq!(from_env(uid, gid, name), want, "{uid:?} {gid:?} {name:?}");
        }
    }
}
