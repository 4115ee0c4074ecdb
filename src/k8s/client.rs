//! The operator's Kubernetes clients: timeouts on every API call, the write fence
//! (`super::fence`) in front of every mutating request, and the witness of Lease renewals that
//! feeds the fence.
//!
//! Timeouts of the main client, and why:
//! - connect and write (sending a request): [`CONNECT_TIMEOUT`], [`SEND_TIMEOUT`]; a healthy
//!   apiserver accepts in milliseconds, and both stay under the Lease duration (default 4 s),
//!   so a dead path shows up as an error before a successor could take over.
//! - the answer to every call but a watch: [`API_CALL_TIMEOUT`] to the response, and for a
//!   write never past the fence's deadline, so a write cannot sit in the client after it.
//! - no socket read timeout: watch streams are quiet for minutes; kube's watcher bounds them
//!   itself (an idle timeout of the server-side `timeoutSeconds`, 290 s, plus a margin) and
//!   re-lists. A read timeout shorter than that would break every quiet watch.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt as _, Full};
use kube::client::{Body, ClientBuilder, DynBody};
use tower::{BoxError, Layer, Service};

use super::fence::{held_by, Fence, Refused};

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
pub const SEND_TIMEOUT: Duration = Duration::from_secs(2);
pub const API_CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// An API call that got no answer in time (it may still have reached the apiserver).
#[derive(Debug, thiserror::Error)]
#[error("the Kubernetes API did not answer within {0:?}: check the apiserver's health and the network path to it")]
pub struct TimedOut(pub Duration);

/// The main client: timeouts as above, every mutating request through `fence`.
pub fn build(mut config: kube::Config, fence: Fence) -> Result<kube::Client, kube::Error> {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.write_timeout = Some(SEND_TIMEOUT);
    config.read_timeout = None;
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&GuardLayer { fence })
        .build())
}

/// What kind of call a request is, for its bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// A long poll (`watch=true`): bounded by kube's watcher, not here.
    Watch,
    Read,
    /// Anything that changes state: fenced.
    Write,
}

/// Pure: the kind of call from the method and the query string.
pub fn classify(method: &Method, query: Option<&str>) -> Call {
    let watch = query
        .unwrap_or_default()
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS if watch => Call::Watch,
        Method::GET | Method::HEAD | Method::OPTIONS => Call::Read,
        _ => Call::Write,
    }
}

/// Pure: the time a call may take, or why a write must not go out.
pub fn bound(
    call: Call,
    fence: impl FnOnce() -> Result<Option<Duration>, Refused>,
) -> Result<Option<Duration>, Refused> {
    match call {
        Call::Watch => Ok(None),
        Call::Read => Ok(Some(API_CALL_TIMEOUT)),
        Call::Write => {
            Ok(Some(fence()?.map_or(API_CALL_TIMEOUT, |left| {
                left.min(API_CALL_TIMEOUT)
            })))
        }
    }
}

#[derive(Clone)]
struct GuardLayer {
    fence: Fence,
}

impl<S> Layer<S> for GuardLayer {
    type Service = Guard<S>;
    fn layer(&self, inner: S) -> Guard<S> {
        Guard {
            inner,
            fence: self.fence.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Guard<S> {
    inner: S,
    fence: Fence,
}

type Answer<B> = Pin<Box<dyn Future<Output = Result<Response<B>, BoxError>> + Send>>;

impl<S, B> Service<Request<Body>> for Guard<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = Answer<B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Answer<B> {
        let call = classify(request.method(), request.uri().query());
        let limit = match bound(call, || self.fence.check()) {
            Ok(limit) => limit,
            Err(refused) => {
                tracing::warn!(method = %request.method(), path = request.uri().path(), error = %refused, "write refused by the fence");
                return Box::pin(std::future::ready(Err(refused.into())));
            }
        };
        let answer = self.inner.call(request);
        Box::pin(async move {
            match limit {
                None => answer.await.map_err(Into::into),
                Some(limit) => match tokio::time::timeout(limit, answer).await {
                    Ok(result) => result.map_err(Into::into),
                    Err(_) => Err(TimedOut(limit).into()),
                },
            }
        })
    }
}

/// The leader campaign's client: `request_timeout` on connect, send and read (a Lease call is
/// small and never a watch), and each answer to a Lease write that names `identity` as holder
/// extends the fence's term from the moment the write was sent.
pub fn campaign(
    mut config: kube::Config,
    request_timeout: Duration,
    witness: Witness,
) -> Result<kube::Client, kube::Error> {
    let timeout = Some(request_timeout);
    (
        config.connect_timeout,
        config.read_timeout,
        config.write_timeout,
    ) = (timeout, timeout, timeout);
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&witness)
        .build())
}

/// Who we are in the Lease and what a confirmed renewal is worth.
#[derive(Clone)]
pub struct Witness {
    pub fence: Fence,
    /// Which of the fence's Leases this client's writes renew.
    pub lease: usize,
    pub identity: Arc<str>,
    pub lease_duration: Duration,
    pub margin: Duration,
}

impl<S> Layer<S> for Witness {
    type Service = Witnessed<S>;
    fn layer(&self, inner: S) -> Witnessed<S> {
        Witnessed {
            inner,
            witness: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Witnessed<S> {
    inner: S,
    witness: Witness,
}

impl<S> Service<Request<Body>> for Witnessed<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Full<Bytes>>;
    type Error = BoxError;
    type Future = Answer<Full<Bytes>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Answer<Full<Bytes>> {
        // Taken before the request leaves: the Lease cannot be anyone else's before this
        // instant plus its duration, whatever the answer's delay.
        let sent_at = Instant::now();
        let write = classify(request.method(), request.uri().query()) == Call::Write;
        let answer = self.inner.call(request);
        let witness = self.witness.clone();
        Box::pin(async move {
            let (parts, body) = answer.await.map_err(Into::into)?.into_parts();
            // Lease objects are small: read whole, then handed on unchanged.
            let bytes = body.collect().await?.to_bytes();
            if write && parts.status.is_success() {
                let lease = serde_json::from_slice(&bytes).unwrap_or_default();
                if held_by(&lease, &witness.identity) {
                    witness.fence.renewed(
                        witness.lease,
                        sent_at,
                        witness.lease_duration,
                        witness.margin,
                    );
                }
            }
            Ok(Response::from_parts(parts, Full::new(bytes)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_left_to_the_watcher_and_writes_are_fenced() {
        assert_eq!(
            classify(&Method::GET, Some("watch=true&timeoutSeconds=290")),
            Call::Watch
        );
        assert_eq!(
            classify(&Method::GET, Some("labelSelector=a%3Dwatch%3Dtrue")),
            Call::Read
        );
        assert_eq!(classify(&Method::GET, None), Call::Read);
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert_eq!(classify(&m, Some("fieldManager=x")), Call::Write, "{m}");
        }
        // A write with a watch parameter is still a write.
        assert_eq!(classify(&Method::PATCH, Some("watch=true")), Call::Write);
    }

    #[test]
    fn every_call_but_a_watch_is_bounded_and_a_write_never_outlives_the_fence() {
        let never =
            || -> Result<Option<Duration>, Refused> { panic!("a read consulted the fence") };
        assert_eq!(bound(Call::Watch, never), Ok(None));
        assert_eq!(bound(Call::Read, never), Ok(Some(API_CALL_TIMEOUT)));
        let ms = Duration::from_millis;
        assert_eq!(bound(Call::Write, || Ok(Some(ms(700)))), Ok(Some(ms(700))));
        assert_eq!(
            bound(Call::Write, || Ok(Some(Duration::from_secs(60)))),
            Ok(Some(API_CALL_TIMEOUT))
        );
        assert_eq!(bound(Call::Write, || Ok(None)), Ok(Some(API_CALL_TIMEOUT)));
        assert_eq!(
            bound(Call::Write, || Err(Refused::NotLeading)),
            Err(Refused::NotLeading)
        );
    }

    /// A fake apiserver behind the guard: answers every call with an empty ConfigMap and
    /// records the methods that reached it.
    fn fenced(fence: Fence, seen: Arc<std::sync::Mutex<Vec<Method>>>) -> kube::Client {
        let service = tower::service_fn(move |request: Request<Body>| {
            seen.lock().unwrap().push(request.method().clone());
            async move {
                let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "ns", "resourceVersion": "7"}});
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&body).unwrap()))
                    .map_err(|e| Box::new(e) as BoxError)
            }
        });
        kube::Client::new(GuardLayer { fence }.layer(service), "default")
    }

    #[tokio::test]
    async fn a_write_after_the_deadline_never_reaches_the_apiserver() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::{Api, Patch, PatchParams};
        use tokio::sync::watch;

        let (_leading, receiver) = watch::channel(true);
        let lapsed = Instant::now().checked_sub(Duration::from_secs(1)).unwrap();
        let fence = Fence::new(receiver, super::super::fence::Term::Until(lapsed));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let api: Api<ConfigMap> = Api::namespaced(fenced(fence.clone(), seen.clone()), "ns");
        api.get("cm").await.expect("reads are not fenced");
        let patch = serde_json::json!({"data": {"k": "v"}});
        let err = api
            .patch(
                "cm",
                &PatchParams::apply("t").force(),
                &Patch::Apply(&patch),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("refused by the fence"), "{err}");
        assert_eq!(*seen.lock().unwrap(), [Method::GET], "the write went out");

        // Renewed: the same write goes out.
        fence.renewed(
            0,
            Instant::now(),
            Duration::from_secs(60),
            Duration::from_secs(1),
        );
        api.patch(
            "cm",
            &PatchParams::apply("t").force(),
            &Patch::Apply(&patch),
        )
        .await
        .expect("a write within the term");
        assert_eq!(*seen.lock().unwrap(), [Method::GET, Method::PATCH]);
    }

    #[test]
    fn timeouts_stay_under_the_default_lease() {
        let lease = Duration::from_secs(4);
        for t in [CONNECT_TIMEOUT, SEND_TIMEOUT, API_CALL_TIMEOUT] {
            assert!(t < lease, "{t:?}");
        }
    }
}
