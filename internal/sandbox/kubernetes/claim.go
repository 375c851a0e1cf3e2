package kubernetes

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The part of agent-sandbox v1.0.1's API terp uses
// (sigs.k8s.io/agent-sandbox/extensions/api/v1beta1), written out here
// rather than imported: its types embed a whole PodSpec and NetworkPolicy,
// which would link most of k8s.io/api into terp for four fields. The JSON
// names are the CRD's; clustertest creates these objects against the real
// CRDs with strict field validation, and reads them with the module's own
// types, so a difference fails there.

// groupVersion is extensions.agents.x-k8s.io/v1beta1.
var groupVersion = schema.GroupVersion{Group: "extensions.agents.x-k8s.io", Version: "v1beta1"}

// The resources terp uses.
var (
	claims    = groupVersion.WithResource("sandboxclaims")
	warmPools = groupVersion.WithResource("sandboxwarmpools")
)

// sandboxClaim is a SandboxClaim.
type sandboxClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              claimSpec   `json:"spec"`
	Status            claimStatus `json:"status,omitempty"`
}

type claimSpec struct {
	WarmPoolRef struct {
		Name string `json:"name"`
	} `json:"warmPoolRef"`
	Lifecycle *claimLifecycle `json:"lifecycle,omitempty"`
}

type claimLifecycle struct {
	ShutdownTime *metav1.Time `json:"shutdownTime,omitempty"`
	// ShutdownPolicy is Delete, DeleteForeground or Retain (the CRD's
	// default, which keeps the claim after shutdownTime).
	ShutdownPolicy string `json:"shutdownPolicy,omitempty"`
}

type claimStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Sandbox    struct {
		Name        string   `json:"name,omitempty"`
		PodIPs      []string `json:"podIPs,omitempty"`
		ServiceFQDN string   `json:"serviceFQDN,omitempty"`
	} `json:"sandbox,omitempty"`
}
