//! A directory held open, and the calls relative to it (`openat`,
//! `fstatat`, `renameat`, `unlinkat`) that the control channel writes its
//! files with: a name is looked up in the directory the handle was opened
//! on, whatever happens to the path that led there, and the last component
//! is never followed when it is a symbolic link.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::Path;

/// An open directory.
pub struct Dir(File);

/// What a name of a directory is, as `lstat` sees it (a link is not
/// followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    /// The owner's user id.
    pub uid: u32,
    /// How many names the file has.
    pub links: u64,
    /// A regular file (not a link, a directory, a device, a FIFO, a socket).
    pub regular: bool,
}

impl Entry {
    // The casts are needed where `stat`'s fields are narrower (macOS).
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &libc::stat) -> Entry {
        Entry {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as u64,
            mtime_ns: st.st_mtime as i128 * 1_000_000_000 + st.st_mtime_nsec as i128,
            uid: st.st_uid,
            links: st.st_nlink as u64,
            regular: st.st_mode & libc::S_IFMT == libc::S_IFREG,
        }
    }

    /// The entry of a file open in `f`.
    pub fn of_file(f: &File) -> io::Result<Entry> {
        let m = f.metadata()?;
        Ok(Entry {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            uid: m.uid(),
            links: m.nlink(),
            regular: m.file_type().is_file(),
        })
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Dir {
    /// Opens the directory at `path` (following links on the way: the
    /// program named it).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC).open(path)?;
        Ok(Dir(f))
    }

    /// The device and inode of the directory itself.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let m = self.0.metadata()?;
        Ok((m.dev(), m.ino()))
    }

    /// What `name` is in the directory, without following a link; None
    /// when there is no such name.
    pub fn entry(&self, name: &CStr) -> io::Result<Option<Entry>> {
        // SAFETY: an all-zero `stat` is a valid value of the plain C struct,
        // which fstatat overwrites.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is this handle's, open while borrowed;
        // `name` is NUL-terminated; `st` is a valid, writable stat.
        let rc = unsafe { libc::fstatat(self.0.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        match check(rc) {
            Ok(()) => Ok(Some(Entry::of(&st))),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Opens `name` for reading without following it when it is a link,
    /// and without waiting: a FIFO or a device opens at once (and is then
    /// told apart by its [`Entry`], which the caller checks before reading).
    pub fn open_read(&self, name: &CStr) -> io::Result<File> {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: the descriptor is this handle's, open while borrowed;
        // `name` is NUL-terminated; no mode is passed (no O_CREAT).
        let fd = unsafe { libc::openat(self.0.as_raw_fd(), name.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Creates `name`, which must not exist (not even as a dangling link),
    /// for writing; `mode` is narrowed by the umask as `open`'s is.
    pub fn create_new(&self, name: &CStr, mode: libc::mode_t) -> io::Result<File> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: the descriptor is this handle's, open while borrowed;
        // `name` is NUL-terminated; the mode is passed as the variadic
        // argument O_CREAT reads.
        let fd = unsafe { libc::openat(self.0.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Renames `from` to `to` within the directory, failing with
    /// `AlreadyExists` when `to` exists, atomically: nothing that appears
    /// at `to` meanwhile is replaced.
    pub fn rename_new(&self, from: &CStr, to: &CStr) -> io::Result<()> {
        let fd = self.0.as_raw_fd();
        #[cfg(target_os = "linux")]
        {
            // SAFETY: the descriptor is this handle's, open while borrowed;
            // both names are NUL-terminated.
            let rc = unsafe { libc::renameat2(fd, from.as_ptr(), fd, to.as_ptr(), libc::RENAME_NOREPLACE) };
            match check(rc) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) => {}
                other => return other,
            }
        }
        #[cfg(target_os = "macos")]
        {
            // SAFETY: as above.
            let rc = unsafe { libc::renameatx_np(fd, from.as_ptr(), fd, to.as_ptr(), libc::RENAME_EXCL) };
            match check(rc) {
                Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => {}
                other => return other,
            }
        }
        // A file system (or a kernel) without the flag: a second link made
        // with `linkat`, which never replaces, then the first removed.
        // SAFETY: as above; flags 0 follows no link (`from` is a file this
        // process made with O_NOFOLLOW).
        check(unsafe { libc::linkat(fd, from.as_ptr(), fd, to.as_ptr(), 0) })?;
        self.remove(from)
    }

    /// Swaps the names `a` and `b` of the directory, atomically: Ok(false)
    /// where the system or the file system cannot.
    pub fn exchange(&self, a: &CStr, b: &CStr) -> io::Result<bool> {
        let fd = self.0.as_raw_fd();
        #[cfg(target_os = "linux")]
        {
            // SAFETY: the descriptor is this handle's, open while borrowed;
            // both names are NUL-terminated.
            let rc = unsafe { libc::renameat2(fd, a.as_ptr(), fd, b.as_ptr(), libc::RENAME_EXCHANGE) };
            match check(rc) {
                Ok(()) => Ok(true),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) => Ok(false),
                Err(e) => Err(e),
            }
        }
        #[cfg(target_os = "macos")]
        {
            // SAFETY: as above.
            let rc = unsafe { libc::renameatx_np(fd, a.as_ptr(), fd, b.as_ptr(), libc::RENAME_SWAP) };
            match check(rc) {
                Ok(()) => Ok(true),
                Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => Ok(false),
                Err(e) => Err(e),
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            let _ = (fd, a, b);
            Ok(false)
        }
    }

    /// Renames `from` over `to` within the directory (`to` replaced if it
    /// exists: the name, never the file it named, which is left untouched).
    pub fn rename_over(&self, from: &CStr, to: &CStr) -> io::Result<()> {
        let fd = self.0.as_raw_fd();
        // SAFETY: the descriptor is this handle's, open while borrowed;
        // both names are NUL-terminated.
        check(unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) })
    }

    /// Removes the name `name` (not a directory).
    pub fn remove(&self, name: &CStr) -> io::Result<()> {
        // SAFETY: the descriptor is this handle's, open while borrowed;
        // `name` is NUL-terminated.
        check(unsafe { libc::unlinkat(self.0.as_raw_fd(), name.as_ptr(), 0) })
    }
}
