package probe

// Batch is the report of one probe run over several targets (several
// URLs, --all or --file): each target's own report and whether it met its
// expectation, then a summary.
type Batch struct {
	Targets []BatchTarget `json:"targets"`
	Summary BatchSummary  `json:"summary"`
}

// BatchTarget is one target of a batch.
type BatchTarget struct {
	Name string `json:"name"`
	// Expect is the result code the target had to produce; empty means
	// ok or auth_required.
	Expect string `json:"expect,omitempty"`
	Passed bool   `json:"passed"`
	// Why says why a target did not pass.
	Why    string  `json:"why,omitempty"`
	Report *Report `json:"report"`
}

// BatchSummary counts a batch's targets.
type BatchSummary struct {
	Targets  int    `json:"targets"`
	Passed   int    `json:"passed"`
	Failed   int    `json:"failed"`
	Warnings int    `json:"warnings"` // steps with status warn, over all targets
	FailOn   string `json:"fail_on"`  // warn or fail
}
