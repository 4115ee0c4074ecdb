use super::*;

fn args(member: Option<&str>, members: &[&str]) -> MemberArgs {
    MemberArgs {
        member: member.map(Into::into),
        members: members.iter().map(|m| m.to_string()).collect(),
        secret_prefix: "kafka-observer-member-".into(),
    }
}

#[test]
fn no_flags_is_a_single_cluster() {
    assert_eq!(MemberPlan::new(&args(None, &[])), Ok(None));
    // An empty value (the chart's default env) is the same as none.
    assert_eq!(MemberPlan::new(&args(Some(" "), &[""])), Ok(None));
}

#[test]
fn three_members_in_the_given_order() {
    let plan = MemberPlan::new(&args(Some("west"), &["east", "west", "tie"]))
        .unwrap()
        .unwrap();
    assert_eq!(plan.local(), "west");
    assert_eq!(plan.members(), ["east", "west", "tie"]);
    assert_eq!(plan.remotes().collect::<Vec<_>>(), ["east", "tie"]);
    assert_eq!(
        secret_name("kafka-observer-member-", "east"),
        "kafka-observer-member-east"
    );
}

#[test]
fn inconsistent_flags_are_refused_with_what_to_fix() {
    let refused = |member, members: &[&str]| MemberPlan::new(&args(member, members)).unwrap_err();
    assert_eq!(
        refused(Some("east"), &[]),
        MembersError::MemberWithoutMembers("east".into())
    );
    assert_eq!(refused(None, &["a", "b", "c"]), MembersError::NoLocalMember);
    assert!(matches!(
        refused(Some("north"), &["east", "west", "tie"]),
        MembersError::LocalNotListed { .. }
    ));
    assert_eq!(
        refused(Some("east"), &["east", "West", "tie"]),
        MembersError::BadName("West".into())
    );
    assert_eq!(
        refused(Some("east"), &["east", "-w", "tie"]),
        MembersError::BadName("-w".into())
    );
    assert_eq!(
        refused(Some("east"), &["east", "west", "east"]),
        MembersError::Duplicate("east".into())
    );
    for members in [
        &["east"][..],
        &["east", "west"],
        &["east", "west", "tie", "north"],
        &["east", "a", "b", "c", "d", "e", "f"],
    ] {
        assert_eq!(
            refused(Some("east"), members),
            MembersError::Count {
                count: members.len()
            },
            "{members:?}"
        );
    }
    assert!(MemberPlan::new(&args(Some("e"), &["a", "b", "c", "d", "e"])).is_ok());
}

const TOKEN: &str = "s3cret-token-value";

/// A kubeconfig as a platform team writes it for the remote ServiceAccount, with `user` and
/// `cluster` extras spliced in.
fn kubeconfig(cluster_extra: &str, user_extra: &str, context_extra: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Config
current-context: west
clusters:
- name: west
  cluster:
    server: https://10.8.2.1:6443
{cluster_extra}
contexts:
- name: west
  context:
    cluster: west
    user: koo-remote
{context_extra}
users:
- name: koo-remote
  user:
{user_extra}
"#
    )
}

const CA: &str = "    certificate-authority-data: Q0E=";
const USER: &str = "    token: s3cret-token-value";
const NS: &str = "    namespace: kafka";

#[test]
fn an_inline_token_kubeconfig_gives_its_namespace() {
    let (file, namespace) = remote_kubeconfig("west", &kubeconfig(CA, USER, NS)).unwrap();
    assert_eq!(namespace, "kafka");
    assert_eq!(file.current_context.as_deref(), Some("west"));
    // A client certificate instead of a token is as good.
    let cert = "    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ";
    assert!(remote_kubeconfig("west", &kubeconfig(CA, cert, NS)).is_ok());
}

#[test]
fn what_a_secret_must_not_make_the_operator_do_is_refused() {
    let cases = [
        (
            "exec plugin",
            kubeconfig(
                CA,
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh",
                NS,
            ),
            "exec",
        ),
        (
            "auth provider",
            kubeconfig(CA, "    auth-provider:\n      name: oidc", NS),
            "auth-provider",
        ),
        (
            "token file",
            kubeconfig(
                CA,
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
                NS,
            ),
            "inline",
        ),
        (
            "client key file",
            kubeconfig(
                CA,
                "    client-certificate: /etc/c.pem\n    client-key: /etc/k.pem",
                NS,
            ),
            "inline",
        ),
        (
            "CA file",
            kubeconfig("    certificate-authority: /etc/ca.pem", USER, NS),
            "CA must be inline",
        ),
        (
            "no CA",
            kubeconfig("", USER, NS),
            "CA must be inline",
        ),
        (
            "skip TLS verification",
            kubeconfig(&format!("{CA}\n    insecure-skip-tls-verify: true"), USER, NS),
            "insecure-skip-tls-verify",
        ),
        (
            "a proxy",
            kubeconfig(&format!("{CA}\n    proxy-url: http://10.0.0.1:3128"), USER, NS),
            "proxy-url",
        ),
        (
            "impersonation",
            kubeconfig(CA, &format!("{USER}\n    as: system:admin"), NS),
            "impersonation",
        ),
        ("no namespace", kubeconfig(CA, USER, ""), "no namespace"),
        ("no credentials", kubeconfig(CA, "    username: bob", NS), "no credentials"),
        ("not a kubeconfig", "{: nope".to_string(), "not valid YAML"),
    ];
    for (what, text, says) in cases {
        let error = remote_kubeconfig("west", &text)
            .expect_err(what)
            .to_string();
        assert!(error.contains(says), "{what}: {error}");
        assert!(error.starts_with("member \"west\": "), "{what}: {error}");
        assert!(!error.contains(TOKEN), "{what} echoes the token: {error}");
        assert!(
            !error.contains("bob"),
            "{what} echoes the username: {error}"
        );
    }
    let http = kubeconfig(CA, USER, NS).replace("https://", "http://");
    let error = remote_kubeconfig("west", &http).unwrap_err().to_string();
    assert!(error.contains("https://"), "{error}");
}
