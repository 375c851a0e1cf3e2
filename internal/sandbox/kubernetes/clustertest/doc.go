// Package clustertest runs the kubernetes sandbox backend against a real
// API server, in-process (k8s.io/apiextensions-apiserver's test server on an
// embedded etcd), with agent-sandbox's own CRDs from the module go.mod names,
// the test playing agent-sandbox's controller and each claimed "pod" a
// bubblewrap namespace running terp's sandbox server in pod mode, as the
// image does: read-only root, /work and /mnt/data on one directory, no
// network, a non-root uid. The conformance suite runs through it, and the
// manifests under examples/kubernetes are validated against the CRDs.
//
// It is a package of its own, with nothing but tests, so that the API
// server and etcd it builds (minutes on two cores) weigh only on its own
// test binary; go test ./... runs it like any other.
package clustertest
