//! The pod status the stand-in reports, computed from what it observed. Pure.
//!
//! Follows the kubelet's shapes (`pkg/kubelet/status/generate.go`): condition
//! types and reasons, `containers with unready status: [..]`, and a transition
//! time that only moves when a condition's status flips. One deliberate
//! difference: Ready and ContainersReady follow the *main* container only (the
//! Kafka node alive and its port answering), so a sidecar whose image has no
//! local binary does not take the Kafka pod out of service.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus, HostIP,
    PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// What is known about one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerView {
    Running {
        /// `standin://<pid>`.
        container_id: String,
        started_at: Option<Timestamp>,
        ready: bool,
    },
    Waiting {
        reason: String,
        message: Option<String>,
    },
}

/// One container's input, in pod-spec order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInput {
    pub name: String,
    pub image: String,
    pub view: ContainerView,
    pub restart_count: i32,
}

/// Everything the status depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusInput {
    pub pod_ip: String,
    pub host_ip: String,
    pub start_time: Timestamp,
    /// `Err(message)` while the pod's volumes have never been set up: the kubelet
    /// then starts no container and the pod stays Pending.
    pub volumes: Result<(), String>,
    pub main_container: String,
    pub containers: Vec<ContainerInput>,
}

/// The status for `input`; `previous` keeps transition times of unchanged conditions.
pub fn pod_status(input: &StatusInput, previous: Option<&PodStatus>, now: Timestamp) -> PodStatus {
    let volumes_ready = input.volumes.is_ok();
    let containers: Vec<ContainerStatus> = input
        .containers
        .iter()
        .map(|c| container_status(c, volumes_ready))
        .collect();
    let main_ready = containers
        .iter()
        .any(|c| c.name == input.main_container && c.ready);
    let not_ready = (!main_ready).then(|| {
        (
            "ContainersNotReady".to_string(),
            format!("containers with unready status: [{}]", input.main_container),
        )
    });

    let conditions = vec![
        condition("PodReadyToStartContainers", volumes_ready, None),
        condition("Initialized", true, None),
        condition("Ready", main_ready, not_ready.clone()),
        condition("ContainersReady", main_ready, not_ready),
        condition("PodScheduled", true, None),
    ]
    .into_iter()
    .map(|c| with_transition_time(c, previous, now))
    .collect();

    PodStatus {
        phase: Some(if volumes_ready { "Running" } else { "Pending" }.to_string()),
        conditions: Some(conditions),
        host_ip: Some(input.host_ip.clone()),
        host_ips: Some(vec![HostIP {
            ip: input.host_ip.clone(),
        }]),
        pod_ip: Some(input.pod_ip.clone()),
        pod_ips: Some(vec![PodIP {
            ip: input.pod_ip.clone(),
        }]),
        start_time: Some(Time(truncate(input.start_time))),
        container_statuses: Some(containers),
        qos_class: Some("BestEffort".to_string()),
        ..Default::default()
    }
}

fn container_status(input: &ContainerInput, volumes_ready: bool) -> ContainerStatus {
    let view = if volumes_ready {
        input.view.clone()
    } else {
        ContainerView::Waiting {
            reason: "ContainerCreating".to_string(),
            message: None,
        }
    };
    let (state, ready, started, container_id) = match view {
        ContainerView::Running {
            container_id,
            started_at,
            ready,
        } => {
            let running = ContainerStateRunning {
                started_at: started_at.map(|t| Time(truncate(t))),
            };
            let state = ContainerState {
                running: Some(running),
                ..Default::default()
            };
            (state, ready, true, Some(container_id))
        }
        ContainerView::Waiting { reason, message } => {
            let waiting = ContainerStateWaiting {
                reason: Some(reason),
                message,
            };
            let state = ContainerState {
                waiting: Some(waiting),
                ..Default::default()
            };
            (state, false, false, None)
        }
    };
    ContainerStatus {
        name: input.name.clone(),
        image: input.image.clone(),
        image_id: String::new(),
        container_id,
        ready,
        started: Some(started),
        restart_count: input.restart_count,
        state: Some(state),
        ..Default::default()
    }
}

fn condition(type_: &str, ok: bool, why_not: Option<(String, String)>) -> PodCondition {
    let (reason, message) = match (ok, why_not) {
        (false, Some((reason, message))) => (Some(reason), Some(message)),
        _ => (None, None),
    };
    PodCondition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason,
        message,
        ..Default::default()
    }
}

fn with_transition_time(
    mut c: PodCondition,
    previous: Option<&PodStatus>,
    now: Timestamp,
) -> PodCondition {
    let earlier = previous
        .and_then(|p| p.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|p| p.type_ == c.type_))
        .filter(|p| p.status == c.status)
        .and_then(|p| p.last_transition_time.clone());
    c.last_transition_time = Some(earlier.unwrap_or(Time(truncate(now))));
    c
}

/// The API stores whole seconds; truncating here keeps equality with what was read back.
fn truncate(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(main: ContainerView, volumes: Result<(), String>) -> StatusInput {
        StatusInput {
            pod_ip: "127.0.1.1".into(),
            host_ip: "127.0.0.1".into(),
            start_time: Timestamp::from_second(1_000).unwrap(),
            volumes,
            main_container: "kafka".into(),
            containers: vec![
                ContainerInput {
                    name: "kafka".into(),
                    image: "apache/kafka:4.1.2".into(),
                    view: main,
                    restart_count: 2,
                },
                ContainerInput {
                    name: "observer-agent".into(),
                    image: "img".into(),
                    view: ContainerView::Waiting {
                        reason: "ImageNotMapped".into(),
                        message: Some("no binary".into()),
                    },
                    restart_count: 0,
                },
            ],
        }
    }

    fn running(ready: bool) -> ContainerView {
        ContainerView::Running {
            container_id: "standin://42".into(),
            started_at: Some(Timestamp::from_second(2_000).unwrap()),
            ready,
        }
    }

    fn cond<'a>(s: &'a PodStatus, t: &str) -> &'a PodCondition {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
    }

    #[test]
    fn ready_main_container_makes_the_pod_ready_despite_an_unmapped_sidecar() {
        let now = Timestamp::from_second(5_000).unwrap();
        let s = pod_status(&input(running(true), Ok(())), None, now);
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(cond(&s, "Ready").status, "True");
        assert_eq!(cond(&s, "ContainersReady").status, "True");
        assert_eq!(s.pod_ip.as_deref(), Some("127.0.1.1"));
        assert_eq!(s.pod_ips.as_ref().unwrap()[0].ip, "127.0.1.1");
        let cs = s.container_statuses.as_ref().unwrap();
        assert_eq!(cs[0].restart_count, 2);
        assert_eq!(cs[0].container_id.as_deref(), Some("standin://42"));
        let waiting = cs[1].state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("ImageNotMapped"));
    }

    #[test]
    fn unready_main_container_gives_the_kubelet_reason_and_message() {
        let now = Timestamp::from_second(5_000).unwrap();
        let s = pod_status(&input(running(false), Ok(())), None, now);
        let ready = cond(&s, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some("containers with unready status: [kafka]")
        );
    }

    #[test]
    fn pod_without_volumes_stays_pending_with_containers_creating() {
        let now = Timestamp::from_second(5_000).unwrap();
        let s = pod_status(
            &input(running(true), Err("configmap not found".into())),
            None,
            now,
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        assert_eq!(cond(&s, "PodReadyToStartContainers").status, "False");
        assert_eq!(cond(&s, "Ready").status, "False");
        for c in s.container_statuses.as_ref().unwrap() {
            let waiting = c.state.as_ref().unwrap().waiting.as_ref().unwrap();
            assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
        }
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let t1 = Timestamp::from_second(5_000).unwrap();
        let t2 = Timestamp::from_second(6_000).unwrap();
        let t3 = Timestamp::from_second(7_000).unwrap();
        let first = pod_status(&input(running(true), Ok(())), None, t1);
        let same = pod_status(&input(running(true), Ok(())), Some(&first), t2);
        assert_eq!(first, same, "nothing changed, nothing to write");
        let flipped = pod_status(&input(running(false), Ok(())), Some(&same), t3);
        assert_eq!(cond(&flipped, "Ready").last_transition_time, Some(Time(t3)));
        assert_eq!(
            cond(&flipped, "Initialized").last_transition_time,
            Some(Time(t1))
        );
    }
}
