//! Secret files: signing keys that live next to the data, never in logs,
//! and never readable by other users: created 0600 in a 0700 directory,
//! refused when a file's mode lets others read or change it.

use crate::error::ConfigError;
use std::io::Write;
use std::path::Path;

/// Reads a secret file (trailing newline ignored). `key` names the setting
/// that pointed here, so the error tells the operator what to fix.
pub fn read_secret(key: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    check_secret_mode(key, path)?;
    let mut bytes = std::fs::read(path).map_err(|e| ConfigError::SecretRead {
        key,
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    while bytes.last().is_some_and(|b| b.is_ascii_whitespace()) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(ConfigError::SecretEmpty {
            key,
            path: path.display().to_string(),
        });
    }
    Ok(bytes)
}

/// Refuses a secret file whose mode lets other users read it or anyone
/// but its owner change it (any "other" bit, or group write). Group read
/// is accepted: Kubernetes mounts secrets 0440 for the pod's fsGroup. A
/// missing file passes here; reading it says it is missing.
pub fn check_secret_mode(key: &'static str, path: &Path) -> Result<(), ConfigError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // metadata follows symlinks: mounted secrets are links into `..data`.
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o027 != 0 {
                return Err(ConfigError::SecretExposed {
                    key,
                    path: path.display().to_string(),
                    mode,
                });
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (key, path);
    Ok(())
}

/// Creates `dir` (and missing parents) 0700: the data dir holds every
/// tenant's board and the signing secrets. An existing directory is left
/// as it is; its files are private anyway.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Writes `contents` to `path` with mode 0600 whatever the umask, and
/// tightens a file an older version wrote with a wider mode.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(contents)
}

/// Creates `path` with 32 random bytes (hex) and mode 0600 unless it
/// exists. Returns whether it was created.
pub fn ensure_secret(path: &Path) -> Result<bool, ConfigError> {
    if path.exists() {
        return Ok(false);
    }
    let fail = |e: std::io::Error| ConfigError::SecretCreate {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        private_dir(parent).map_err(fail)?;
    }
    let mut bytes = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(mut file) => {
            file.write_all(hex::encode(bytes).as_bytes())
                .map_err(fail)?;
            file.sync_all().map_err(fail)?;
            Ok(true)
        }
        // Another process created it first: theirs is as good as ours.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(fail(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_private_secret_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/jwt.secret");
        assert!(ensure_secret(&path).unwrap());
        let first = read_secret("jwt_secret_file", &path).unwrap();
        assert_eq!(first.len(), 64);
        assert!(!ensure_secret(&path).unwrap());
        assert_eq!(read_secret("jwt_secret_file", &path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let err = read_secret("jwt_secret_file", &dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().starts_with("jwt_secret_file"));
    }

    #[cfg(unix)]
    fn mode_of(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[cfg(unix)]
    #[test]
    fn the_directory_a_secret_creates_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        assert!(ensure_secret(&data.join("session.key")).unwrap());
        assert_eq!(mode_of(&data), 0o700);
    }

    #[cfg(unix)]
    #[test]
    fn a_secret_others_may_read_or_change_is_refused_naming_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwt.secret");
        ensure_secret(&path).unwrap();
        for mode in [0o644, 0o604, 0o660, 0o602] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = read_secret("jwt_secret_file", &path).unwrap_err();
            assert!(
                matches!(err, ConfigError::SecretExposed { .. }),
                "{mode:o}: {err}"
            );
            let text = err.to_string();
            assert!(text.starts_with("jwt_secret_file"), "{text}");
            assert!(
                text.contains(&format!("chmod 600 {}", path.display())),
                "{text}"
            );
        }
        // Owner only, and group read (fsGroup mounts), are accepted.
        for mode in [0o600, 0o400, 0o640, 0o440] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            read_secret("jwt_secret_file", &path).unwrap();
        }
    }

    #[cfg(unix)]
    #[test]
    fn private_files_are_0600_whatever_they_were() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.url");
        write_private(&path, b"http://a").unwrap();
        assert_eq!(mode_of(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"http://b").unwrap();
        assert_eq!(mode_of(&path), 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"http://b");
    }
}
