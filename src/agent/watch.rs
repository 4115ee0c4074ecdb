//! Follows the mounted ConfigMap directory and publishes a new [`Snapshot`] on every change;
//! the same for the JVM's loaded report (`--loaded-file`).
//!
//! The kubelet updates a ConfigMap volume by writing a new `..<timestamp>` directory and
//! renaming a `..data` symlink over the old one; the visible file is a symlink through
//! `..data`. The patched JVM writes its report to a temporary file and renames it over the
//! report. So the agent watches the *directory* with inotify (any event there means "read
//! again") and also re-reads on a slow timer, a safety net for missed events or a directory
//! that appeared after start-up.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{watch, Notify};

use super::snapshot::{self, Observation, Reader, Snapshot};
use crate::shutdown::Shutdown;

/// One followed file: where it is, how it is read and what the log calls it.
#[derive(Clone, Debug)]
pub struct Followed {
    pub dir: PathBuf,
    pub key: String,
    pub read: Reader,
    /// `observer file` or `JVM report`, for the log lines.
    pub what: &'static str,
}

impl Followed {
    pub fn path(&self) -> PathBuf {
        self.dir.join(&self.key)
    }

    /// A path split into its directory (watched) and file name; `None` without a file name.
    pub fn of_path(path: &Path, read: Reader, what: &'static str) -> Option<Self> {
        let key = path.file_name()?.to_str()?.to_owned();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        Some(Self {
            dir,
            key,
            read,
            what,
        })
    }
}

/// Reads the file once.
pub async fn observe(path: &Path) -> Observation {
    match tokio::fs::read(path).await {
        Ok(bytes) => Observation::Content(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Observation::Missing,
        Err(e) => Observation::Unreadable(e.to_string()),
    }
}

/// Reads the followed file and updates `reports` if the report changed; logs the change.
pub async fn refresh(followed: &Followed, reports: &watch::Sender<Snapshot>) {
    let path = followed.path();
    let observation = observe(&path).await;
    if let Observation::Unreadable(error) = &observation {
        tracing::warn!(path = %path.display(), %error, what = followed.what, "cannot read the file; keeping the last report");
    }
    let previous = reports.borrow().clone();
    if let Some(next) = snapshot::next(
        followed.read,
        Some(&previous),
        &observation,
        Timestamp::now(),
    ) {
        log_change(followed.what, &previous, &next);
        reports.send_replace(next);
    }
}

fn log_change(what: &str, before: &Snapshot, after: &Snapshot) {
    tracing::info!(
        before.source = ?before.source,
        before.revision = ?before.revision,
        before.ids = ?before.ids,
        after.source = ?after.source,
        after.revision = ?after.revision,
        after.ids = ?after.ids,
        after.observer_set = ?after.observer_set,
        after.sha256 = ?after.sha256,
        "{what} changed"
    );
}

/// Watches the followed file's directory until `shutdown`, keeping `reports` current.
pub async fn follow(
    followed: Followed,
    resync: Duration,
    reports: watch::Sender<Snapshot>,
    shutdown: Shutdown,
) {
    let wake = Arc::new(Notify::new());
    let mut watcher: Option<RecommendedWatcher> = None;
    let mut ticker = tokio::time::interval(resync);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if watcher.is_none() {
            watcher = start_watcher(&followed.dir, followed.what, wake.clone());
        }
        refresh(&followed, &reports).await;
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = wake.notified() => {}
            _ = ticker.tick() => {}
        }
    }
}

/// Whether an event in the watched directory calls for a re-read. Opening and reading a file (our
/// own re-read included) is an access event: it never changes the content, and waking on it
/// made every read trigger the next one (one busy core per agent).
fn wakes(kind: &EventKind) -> bool {
    !matches!(kind, EventKind::Access(_))
}

// A failure here is not fatal: the periodic re-read still works and the next tick retries.
fn start_watcher(dir: &Path, what: &str, wake: Arc<Notify>) -> Option<RecommendedWatcher> {
    let handler = move |event: notify::Result<notify::Event>| match event {
        Ok(e) if !wakes(&e.kind) => {}
        // `notify_one` stores a permit when nobody waits, so a burst of events between two
        // reads coalesces into one re-read and none is lost.
        Ok(_) => wake.notify_one(),
        Err(e) => {
            tracing::warn!(error = %e, "inotify reported an error; relying on the periodic re-read")
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "cannot create an inotify watcher; relying on the periodic re-read");
            return None;
        }
    };
    match watcher.watch(dir, RecursiveMode::NonRecursive) {
        Ok(()) => {
            tracing::info!(dir = %dir.display(), what, "watching the directory");
            Some(watcher)
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), what, error = %e, "cannot watch the directory yet; will retry");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RenameMode};

    use super::*;

    #[test]
    fn our_own_reads_do_not_wake_the_watcher_and_changes_do() {
        assert!(!wakes(&EventKind::Access(AccessKind::Open(
            AccessMode::Read
        ))));
        assert!(!wakes(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!wakes(&EventKind::Access(AccessKind::Read)));
        // The kubelet's ..data swap and the JVM's report rename.
        assert!(wakes(&EventKind::Modify(ModifyKind::Name(RenameMode::To))));
        assert!(wakes(&EventKind::Create(CreateKind::File)));
        assert!(wakes(&EventKind::Modify(ModifyKind::Any)));
    }
}
