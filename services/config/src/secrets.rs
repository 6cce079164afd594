//! Secret files: signing keys that live next to the data, never in logs.

use crate::error::ConfigError;
use std::io::Write;
use std::path::Path;

/// Reads a secret file (trailing newline ignored). `key` names the setting
/// that pointed here, so the error tells the operator what to fix.
pub fn read_secret(key: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
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
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
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
}
