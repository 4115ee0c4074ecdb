//! Kubelet stand-in for the e2e test bed (work in progress).

fn main() {}
