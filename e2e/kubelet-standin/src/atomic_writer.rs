//! The kubelet's atomic-writer layout for ConfigMap volumes
//! (Kubernetes `pkg/volume/util/atomic_writer.go`), reimplemented.
//!
//! ```text
//! <dir>/..2026_11_29_08_50_01.123456789/observer.ids   the real files, one dir per version
//! <dir>/..data -> ..2026_11_29_08_50_01.123456789       swapped by rename(2) of a temp symlink
//! <dir>/observer.ids -> ..data/observer.ids             what containers open
//! ```
//!
//! A reader that resolves `<dir>/<key>` sees either the whole old version or the
//! whole new one, never a mix, because the only switching step is one rename.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use k8s_openapi::jiff::Timestamp;

/// Name of the symlink that points at the current version directory.
pub const DATA_LINK: &str = "..data";
const DATA_LINK_TMP: &str = "..data_tmp";

/// One file to project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    pub data: Vec<u8>,
    /// Permission bits (the volume's `defaultMode` or the item's `mode`).
    pub mode: u32,
}

/// Relative path -> content: everything a volume should contain.
pub type Payload = BTreeMap<PathBuf, FileContent>;

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The current version already holds exactly this payload; nothing touched.
    Unchanged,
    /// A new version directory was written and `..data` now points at it.
    Written { version_dir: String },
}

#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    #[error("invalid path {path:?} in volume payload: {reason}")]
    InvalidPath { path: PathBuf, reason: &'static str },
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AtomicWriteError {
    let path = path.to_path_buf();
    move |source| AtomicWriteError::Io { op, path, source }
}

/// True when `dir` has ever received a version (its `..data` link exists).
pub fn has_content(dir: &Path) -> bool {
    fs::symlink_metadata(dir.join(DATA_LINK)).is_ok()
}

/// Projects `payload` into `dir`, only if it differs from the current version.
pub fn write(dir: &Path, payload: &Payload) -> Result<WriteOutcome, AtomicWriteError> {
    for path in payload.keys() {
        validate_path(path)?;
    }
    fs::create_dir_all(dir).map_err(io("create directory", dir))?;

    let current = current_version(dir)?;
    if let Some(version) = &current {
        if read_tree(&dir.join(version))? == *payload && visible_links_present(dir, payload) {
            return Ok(WriteOutcome::Unchanged);
        }
    }

    let version = create_version_dir(dir)?;
    let version_path = dir.join(&version);
    for (path, content) in payload {
        let file = version_path.join(path);
        if let Some(parent) = file.parent() {
            fs::create_dir_all(parent).map_err(io("create directory", parent))?;
        }
        fs::write(&file, &content.data).map_err(io("write", &file))?;
        fs::set_permissions(&file, fs::Permissions::from_mode(content.mode))
            .map_err(io("chmod", &file))?;
    }

    // The switch: a fresh temp link renamed over `..data` (rename is atomic).
    let tmp = dir.join(DATA_LINK_TMP);
    remove_if_present(&tmp)?;
    symlink(&version, &tmp).map_err(io("create symlink", &tmp))?;
    fs::rename(&tmp, dir.join(DATA_LINK)).map_err(io("rename", &tmp))?;

    let visible = top_level_names(payload);
    for name in &visible {
        ensure_visible_link(dir, name)?;
    }
    remove_stale_entries(dir, &version, &visible)?;
    Ok(WriteOutcome::Written {
        version_dir: version,
    })
}

fn validate_path(path: &Path) -> Result<(), AtomicWriteError> {
    let invalid = |reason| AtomicWriteError::InvalidPath {
        path: path.to_path_buf(),
        reason,
    };
    if path.as_os_str().is_empty() {
        return Err(invalid("empty"));
    }
    if path.is_absolute() {
        return Err(invalid("must be relative"));
    }
    if path
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(invalid("must not contain '..' or '.'"));
    }
    if path.to_string_lossy().starts_with("..") {
        return Err(invalid(
            "must not start with '..' (reserved for the writer)",
        ));
    }
    Ok(())
}

/// The version directory `..data` points at, if any.
fn current_version(dir: &Path) -> Result<Option<String>, AtomicWriteError> {
    let link = dir.join(DATA_LINK);
    match fs::read_link(&link) {
        Ok(target) => Ok(Some(target.to_string_lossy().into_owned())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("read symlink", &link)(e)),
    }
}

/// Every regular file under `root`, by relative path, with its content and mode.
fn read_tree(root: &Path) -> Result<Payload, AtomicWriteError> {
    let mut out = Payload::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let abs = root.join(&rel);
        let entries = match fs::read_dir(&abs) {
            Ok(entries) => entries,
            // A dangling `..data` reads as "no content": the next write repairs it.
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io("list", &abs)(e)),
        };
        for entry in entries {
            let entry = entry.map_err(io("list", &abs))?;
            let child = rel.join(entry.file_name());
            let meta = entry.metadata().map_err(io("stat", &entry.path()))?;
            if meta.is_dir() {
                stack.push(child);
            } else {
                let data = fs::read(entry.path()).map_err(io("read", &entry.path()))?;
                let mode = meta.permissions().mode() & 0o7777;
                out.insert(child, FileContent { data, mode });
            }
        }
    }
    Ok(out)
}

fn top_level_names(payload: &Payload) -> BTreeSet<String> {
    payload
        .keys()
        .filter_map(|p| p.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect()
}

fn link_target(name: &str) -> PathBuf {
    Path::new(DATA_LINK).join(name)
}

fn visible_links_present(dir: &Path, payload: &Payload) -> bool {
    top_level_names(payload)
        .iter()
        .all(|name| fs::read_link(dir.join(name)).ok() == Some(link_target(name)))
}

fn ensure_visible_link(dir: &Path, name: &str) -> Result<(), AtomicWriteError> {
    let path = dir.join(name);
    if fs::read_link(&path).ok() == Some(link_target(name)) {
        return Ok(());
    }
    remove_if_present(&path)?;
    symlink(link_target(name), &path).map_err(io("create symlink", &path))
}

/// Removes visible links no longer in the payload and every version dir but `keep`.
fn remove_stale_entries(
    dir: &Path,
    keep: &str,
    visible: &BTreeSet<String>,
) -> Result<(), AtomicWriteError> {
    for entry in fs::read_dir(dir).map_err(io("list", dir))? {
        let entry = entry.map_err(io("list", dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let is_version_dir = name.starts_with("..") && name != DATA_LINK && name != keep;
        let is_stale_link = !name.starts_with("..")
            && !visible.contains(&name)
            && fs::read_link(&path)
                .map(|t| t.starts_with(DATA_LINK))
                .unwrap_or(false);
        if is_version_dir || is_stale_link {
            remove_if_present(&path)?;
        }
    }
    Ok(())
}

fn create_version_dir(dir: &Path) -> Result<String, AtomicWriteError> {
    let now = Timestamp::now();
    let stamp = now.strftime("%Y_%m_%d_%H_%M_%S").to_string();
    for attempt in 0u32.. {
        let name = format!("..{stamp}.{:09}{attempt}", now.subsec_nanosecond());
        let path = dir.join(&name);
        match fs::create_dir(&path) {
            Ok(()) => {
                fs::set_permissions(&path, fs::Permissions::from_mode(0o755))
                    .map_err(io("chmod", &path))?;
                return Ok(name);
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io("create directory", &path)(e)),
        }
    }
    unreachable!("u32 attempts exhausted")
}

fn remove_if_present(path: &Path) -> Result<(), AtomicWriteError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("stat", path)(e)),
    };
    let result = if meta.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    result.map_err(io("remove", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(entries: &[(&str, &str)]) -> Payload {
        entries
            .iter()
            .map(|(k, v)| {
                let content = FileContent {
                    data: v.as_bytes().to_vec(),
                    mode: 0o644,
                };
                (PathBuf::from(k), content)
            })
            .collect()
    }

    fn version_dirs(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("..") && n != DATA_LINK)
            .collect();
        names.sort();
        names
    }

    #[test]
    fn first_write_creates_the_kubelet_layout() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("observer-ids");
        assert!(!has_content(&dir));
        let outcome = write(&dir, &payload(&[("observer.ids", "4\n")])).unwrap();
        let WriteOutcome::Written { version_dir } = outcome else {
            panic!("expected a write, got {outcome:?}");
        };
        assert!(version_dir.starts_with("..20"), "{version_dir}");
        assert_eq!(
            fs::read_link(dir.join("..data")).unwrap(),
            PathBuf::from(&version_dir)
        );
        assert_eq!(
            fs::read_link(dir.join("observer.ids")).unwrap(),
            PathBuf::from("..data/observer.ids")
        );
        assert_eq!(fs::read_to_string(dir.join("observer.ids")).unwrap(), "4\n");
        let mode = fs::metadata(dir.join("observer.ids"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        assert_eq!(version_dirs(&dir), vec![version_dir]);
        assert!(!dir.join(DATA_LINK_TMP).exists());
        assert!(has_content(&dir));
    }

    #[test]
    fn same_payload_twice_touches_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        let p = payload(&[("observer.ids", "4\n"), ("other", "x")]);
        let first = write(&dir, &p).unwrap();
        let before = version_dirs(&dir);
        assert_eq!(write(&dir, &p).unwrap(), WriteOutcome::Unchanged);
        assert_eq!(version_dirs(&dir), before);
        assert!(matches!(first, WriteOutcome::Written { .. }));
    }

    #[test]
    fn changed_payload_swaps_data_and_removes_the_old_version() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        write(&dir, &payload(&[("observer.ids", "4\n"), ("gone", "x")])).unwrap();
        let old = version_dirs(&dir);
        // A reader holding the visible path keeps working across the swap.
        let visible = dir.join("observer.ids");
        let outcome = write(&dir, &payload(&[("observer.ids", "3\n4\n")])).unwrap();
        let WriteOutcome::Written { version_dir } = outcome else {
            panic!("expected a write");
        };
        assert_ne!(vec![version_dir.clone()], old);
        assert_eq!(version_dirs(&dir), vec![version_dir]);
        assert_eq!(fs::read_to_string(&visible).unwrap(), "3\n4\n");
        assert!(
            fs::symlink_metadata(dir.join("gone")).is_err(),
            "stale key link removed"
        );
    }

    #[test]
    fn mode_change_alone_is_a_change() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        let mut p = payload(&[("k", "v")]);
        write(&dir, &p).unwrap();
        p.get_mut(Path::new("k")).unwrap().mode = 0o600;
        assert!(matches!(
            write(&dir, &p).unwrap(),
            WriteOutcome::Written { .. }
        ));
        let mode = fs::metadata(dir.join("k")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn nested_item_paths_get_one_top_level_link() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        write(&dir, &payload(&[("conf/a", "1"), ("conf/b", "2")])).unwrap();
        assert_eq!(
            fs::read_link(dir.join("conf")).unwrap(),
            PathBuf::from("..data/conf")
        );
        assert_eq!(fs::read_to_string(dir.join("conf/b")).unwrap(), "2");
    }

    #[test]
    fn a_deleted_visible_link_is_restored_without_a_new_version() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        let p = payload(&[("observer.ids", "4\n")]);
        write(&dir, &p).unwrap();
        fs::remove_file(dir.join("observer.ids")).unwrap();
        assert!(matches!(
            write(&dir, &p).unwrap(),
            WriteOutcome::Written { .. }
        ));
        assert_eq!(fs::read_to_string(dir.join("observer.ids")).unwrap(), "4\n");
        assert_eq!(version_dirs(&dir).len(), 1);
    }

    #[test]
    fn empty_payload_is_an_empty_but_set_up_volume() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("v");
        write(&dir, &payload(&[("k", "v")])).unwrap();
        write(&dir, &Payload::new()).unwrap();
        assert!(has_content(&dir));
        assert!(fs::symlink_metadata(dir.join("k")).is_err());
        assert_eq!(
            write(&dir, &Payload::new()).unwrap(),
            WriteOutcome::Unchanged
        );
    }

    #[test]
    fn rejects_paths_that_escape_or_collide_with_the_layout() {
        let tmp = tempfile::tempdir().unwrap();
        for bad in ["../x", "/abs", "..data", "a/../b", ""] {
            let err = write(tmp.path(), &payload(&[(bad, "v")])).unwrap_err();
            assert!(
                matches!(err, AtomicWriteError::InvalidPath { .. }),
                "{bad}: {err}"
            );
        }
    }
}
