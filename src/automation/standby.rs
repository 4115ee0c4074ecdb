//! What every replica does for the automation, leading or not: it resolves the ObserverSets'
//! bootstrap names every `name_cache::WARM_EVERY`, so that a replica taking over after the
//! leader's zone was lost connects with addresses it already has when the cluster DNS is slow
//! (`kafka::name_cache`). Costs one list of ObserverSets and a lookup per bootstrap name a minute.

use std::collections::BTreeSet;

use kube::api::ListParams;
use kube::{Api, Client};

use crate::crd::{parse_bootstrap_servers, ObserverSet};
use crate::k8s::scope::WatchScope;
use crate::kafka::name_cache;
use crate::shutdown::Shutdown;

/// At most this many names are resolved a round (a bound against many or hostile sets).
const MAX_NAMES_A_ROUND: usize = 1024;

/// The bootstrap `host:port`s of `sets` (each set's valid ones), without duplicates, at most
/// [`MAX_NAMES_A_ROUND`].
pub fn bootstrap_names(sets: &[ObserverSet]) -> BTreeSet<String> {
    sets.iter()
        .filter_map(|s| parse_bootstrap_servers(&s.spec.kafka.bootstrap_servers).ok())
        .flatten()
        .take(MAX_NAMES_A_ROUND)
        .collect()
}

/// Resolves the bootstrap names of the ObserverSets `scope` holds, now and every
/// `name_cache::WARM_EVERY`, until `shutdown`.
pub async fn keep_names_resolved(client: Client, scope: WatchScope, shutdown: Shutdown) {
    let apis: Vec<Api<ObserverSet>> = scope.apis(&client);
    let mut ticker = tokio::time::interval(name_cache::WARM_EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = shutdown.wait() => return,
        }
        let mut sets = Vec::new();
        for api in &apis {
            match api.list(&ListParams::default()).await {
                Ok(list) => sets.extend(list.items),
                Err(e) => {
                    tracing::debug!(error = %e, "listing ObserverSets to resolve their bootstrap names failed")
                }
            }
        }
        name_cache::warm(bootstrap_names(&sets)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ObserverSetSpec;

    fn set(bootstrap: &str) -> ObserverSet {
        let spec: ObserverSetSpec = serde_json::from_value(serde_json::json!({
            "kafka": {"bootstrapServers": bootstrap},
            "nodes": {
                "controllers": {"selector": {"matchLabels": {"c": "1"}}, "nodeId": {"ordinalOffset": 101}},
                "brokers": {"selector": {"matchLabels": {"b": "1"}}, "nodeId": {"ordinalOffset": 1}},
            },
            "observers": [4],
        }))
        .unwrap();
        ObserverSet::new("s", spec)
    }

    #[test]
    fn each_valid_name_once() {
        let names = bootstrap_names(&[
            set("kafka-bootstrap.kafka.svc:9092,10.0.0.1:9092"),
            set("kafka-bootstrap.kafka.svc:9092"),
            set("not a server list"),
        ]);
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            vec!["10.0.0.1:9092", "kafka-bootstrap.kafka.svc:9092"]
        );
    }
}
