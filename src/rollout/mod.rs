//! The pure core of the reconciler: which observer set the pods should read
//! ([`effective`]) and how a change of it reaches them, controllers first ([`machine`]), and
//! what that reads and writes in the cluster: the role's pods ([`pods`], [`nudge`]), the
//! observer ConfigMaps ([`config_map`]) and the agents' answers ([`acknowledgement`]), and which
//! unreachable pods a promotion may go on without ([`unreachable`]).
//!
//! Nothing here does I/O or reads a clock: the shell passes in what it observed and the time,
//! and carries out the [`RolloutDecision`]. That is what lets the property tests replay every
//! interleaving of acknowledgements, timeouts, crashes and restarts.

pub mod acknowledgement;
pub mod config_map;
pub mod effective;
pub mod machine;
pub mod model;
pub mod nudge;
pub mod pods;
pub mod unreachable;

#[cfg(test)]
mod members_tests;
#[cfg(test)]
mod simulation;
#[cfg(test)]
mod tests;

pub use effective::{effective_set, rollout_kind};
pub use machine::{advance, applied, awaited, content};
pub use model::{
    pod_key, role_of, step_of, Acknowledgements, Expectation, Happening, ListWrite, LiveList,
    PodNudge, PodObservation, RoleObservation, RolloutDecision, RolloutInput, RolloutSettings,
    RolloutState, WriteCause, LOCAL,
};
