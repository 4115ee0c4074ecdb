//! The Kubernetes shell of the reconciler, split by the object it reads or writes:
//! pods (`dereference`, `nudge`), the observer ConfigMaps (`config_map`), the agents
//! (`acknowledgement`), the Kafka connection's Secrets (`secrets`), the ObserverSet status (`status`), events (`events`) and deletion
//! (`finalizer`); who writes what, for both loops (`writers`). Builders are pure and unit-tested; the async functions are thin API calls.

pub mod acknowledgement;
pub mod config_map;
pub mod dereference;
pub mod error;
pub mod events;
pub mod finalizer;
pub mod nudge;
pub mod secrets;
pub mod status;
pub mod writers;

pub use error::{Error, Result};
