// Package adversarial holds terp's adversarial suite: hostile or careless
// model code run through the real local (bubblewrap) sandbox, the script and
// kernel runners, and terp itself, each case asserting that the code is
// contained and that terp keeps working afterwards. The package has no code
// of its own; its tests are the point. docs/security.md summarizes them.
package adversarial
