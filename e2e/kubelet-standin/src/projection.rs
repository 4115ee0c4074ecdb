//! What a ConfigMap volume should contain: the pod's volume source plus the
//! ConfigMap (if it exists) become an atomic-writer payload. Pure.
//!
//! Mirrors the kubelet's `configmap` volume plugin (`pkg/volume/configmap`):
//! all keys (or only `items`), `defaultMode` 0644 unless set, an item's own
//! `mode` winning, a missing ConfigMap being an error unless the volume is optional
//! (then the volume is empty), and a missing item key likewise.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource};

use crate::atomic_writer::{FileContent, Payload};

/// The kubelet's default file mode for ConfigMap volumes.
pub const DEFAULT_MODE: u32 = 0o644;

/// Why a volume cannot be set up now; the text matches the kubelet's FailedMount message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectionError {
    #[error("configmap {name:?} not found")]
    ConfigMapNotFound { name: String },
    #[error("configmap references non-existent config key: {key}")]
    KeyNotFound { key: String },
}

/// The payload for `source` given the ConfigMap it names (`None` when absent).
pub fn configmap_payload(
    source: &ConfigMapVolumeSource,
    configmap: Option<&ConfigMap>,
) -> Result<Payload, ProjectionError> {
    let optional = source.optional.unwrap_or(false);
    let Some(configmap) = configmap else {
        return if optional {
            Ok(Payload::new())
        } else {
            Err(ProjectionError::ConfigMapNotFound {
                name: source.name.clone(),
            })
        };
    };
    let default_mode = source.default_mode.map(to_mode).unwrap_or(DEFAULT_MODE);
    let lookup = |key: &str| -> Option<Vec<u8>> {
        let text = configmap.data.as_ref().and_then(|d| d.get(key));
        let binary = configmap.binary_data.as_ref().and_then(|d| d.get(key));
        text.map(|t| t.as_bytes().to_vec())
            .or_else(|| binary.map(|b| b.0.clone()))
    };

    let mut payload = Payload::new();
    match &source.items {
        Some(items) if !items.is_empty() => {
            for item in items {
                match lookup(&item.key) {
                    Some(data) => {
                        let mode = item.mode.map(to_mode).unwrap_or(default_mode);
                        payload.insert(PathBuf::from(&item.path), FileContent { data, mode });
                    }
                    None if optional => {}
                    None => {
                        return Err(ProjectionError::KeyNotFound {
                            key: item.key.clone(),
                        })
                    }
                }
            }
        }
        _ => {
            let keys = configmap.data.iter().flat_map(|d| d.keys());
            let binary_keys = configmap.binary_data.iter().flat_map(|d| d.keys());
            for key in keys.chain(binary_keys) {
                if let Some(data) = lookup(key) {
                    let content = FileContent {
                        data,
                        mode: default_mode,
                    };
                    payload.insert(PathBuf::from(key), content);
                }
            }
        }
    }
    Ok(payload)
}

fn to_mode(mode: i32) -> u32 {
    (mode as u32) & 0o7777
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::KeyToPath;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn source(name: &str) -> ConfigMapVolumeSource {
        ConfigMapVolumeSource {
            name: name.into(),
            ..Default::default()
        }
    }

    fn configmap(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn projects_every_key_with_the_default_mode() {
        let cm = configmap(&[("observer.ids", "4\n"), ("b", "2")]);
        let payload = configmap_payload(&source("kafka-observers-broker"), Some(&cm)).unwrap();
        assert_eq!(payload.len(), 2);
        let file = &payload[&PathBuf::from("observer.ids")];
        assert_eq!(
            (file.data.as_slice(), file.mode),
            (b"4\n".as_slice(), 0o644)
        );
    }

    #[test]
    fn missing_configmap_fails_unless_optional() {
        let err = configmap_payload(&source("kafka-observers-broker"), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "configmap \"kafka-observers-broker\" not found"
        );
        let mut optional = source("x");
        optional.optional = Some(true);
        assert_eq!(configmap_payload(&optional, None).unwrap(), Payload::new());
    }

    #[test]
    fn items_select_and_rename_keys_with_their_own_modes() {
        let mut src = source("cm");
        src.default_mode = Some(0o600);
        src.items = Some(vec![
            KeyToPath {
                key: "observer.ids".into(),
                path: "ids/current".into(),
                mode: Some(0o400),
            },
            KeyToPath {
                key: "b".into(),
                path: "b".into(),
                mode: None,
            },
        ]);
        let cm = configmap(&[("observer.ids", "4"), ("b", "2"), ("c", "3")]);
        let payload = configmap_payload(&src, Some(&cm)).unwrap();
        assert_eq!(payload.len(), 2);
        assert_eq!(payload[&PathBuf::from("ids/current")].mode, 0o400);
        assert_eq!(payload[&PathBuf::from("b")].mode, 0o600);
    }

    #[test]
    fn missing_item_key_fails_unless_optional() {
        let mut src = source("cm");
        src.items = Some(vec![KeyToPath {
            key: "nope".into(),
            path: "p".into(),
            mode: None,
        }]);
        let cm = configmap(&[("a", "1")]);
        assert_eq!(
            configmap_payload(&src, Some(&cm)).unwrap_err(),
            ProjectionError::KeyNotFound { key: "nope".into() }
        );
        src.optional = Some(true);
        assert!(configmap_payload(&src, Some(&cm)).unwrap().is_empty());
    }

    #[test]
    fn binary_data_is_projected_byte_for_byte() {
        let cm = ConfigMap {
            binary_data: Some(BTreeMap::from([(
                "bin".to_string(),
                ByteString(vec![0, 255, 10]),
            )])),
            ..Default::default()
        };
        let payload = configmap_payload(&source("cm"), Some(&cm)).unwrap();
        assert_eq!(payload[&PathBuf::from("bin")].data, vec![0, 255, 10]);
    }
}
