//! The board's files are private to the user running Corkboard: the
//! directory is created 0700, and `board.sqlite3` and its audit file are
//! created 0600 before SQLite opens them, so their `-wal` and `-shm`
//! (which SQLite creates with the database file's mode, whatever the
//! umask) are 0600 too. Files an older
//! version left readable by others are tightened; a directory that others
//! may enter is reported (it may be shared, so it is not changed).

use crate::error::SqliteError;
use std::path::Path;

/// The files SQLite keeps next to the database in WAL mode.
const COMPANIONS: [&str; 2] = ["-wal", "-shm"];

/// Creates the board's directory 0700 if missing and warns, naming the fix,
/// when an existing one lets other users in.
pub(crate) fn private_dir(dir: &Path) -> Result<(), SqliteError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|source| SqliteError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    #[cfg(unix)]
    if let Some(mode) = mode_of(dir).filter(|mode| mode & 0o077 != 0) {
        tracing::warn!(
            path = %dir.display(),
            mode = format!("{mode:04o}"),
            "the board's directory lets other users list it (its files are private); run `chmod 700 {}`",
            dir.display()
        );
    }
    Ok(())
}

/// Creates the database file 0600 unless it exists, and tightens it and
/// its WAL companions to 0600 when an older version left them wider.
pub(crate) fn private_db(path: &Path) -> Result<(), SqliteError> {
    let mut options = std::fs::OpenOptions::new();
    // create_new: an existing file (or whatever is in the way) is left for
    // SQLite to open and to report on as it always has.
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(SqliteError::CreateFile {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    #[cfg(unix)]
    {
        let mut name = path.as_os_str().to_owned();
        tighten(path);
        for suffix in COMPANIONS {
            name.push(suffix);
            tighten(Path::new(&name));
            name = path.as_os_str().to_owned();
        }
    }
    Ok(())
}

/// Sets 0600 on a file others may read (umask or an older version); a file
/// that is not there is fine, one that cannot be changed is reported.
#[cfg(unix)]
fn tighten(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Some(mode) = mode_of(path).filter(|mode| mode & 0o077 != 0) else {
        return;
    };
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            was = format!("{mode:04o}"),
            "the board file was readable by other users; it is now 0600"
        ),
        Err(err) => tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:04o}"),
            "the board file is readable by other users and could not be changed ({err}); run `chmod 600 {}`",
            path.display()
        ),
    }
}

#[cfg(unix)]
fn mode_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|meta| meta.permissions().mode() & 0o7777)
}
