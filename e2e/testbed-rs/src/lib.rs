//! Access to the local e2e test bed (work in progress).
