package report

import (
	"encoding/json"
	"io"
	"strings"
	"unicode"
)

// SARIF 2.1.0 (OASIS): the subset mcpx fills.
const (
	sarifVersion = "2.1.0"
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	// InformationURI is where the tool's rules are explained.
	InformationURI = "https://github.com/mcpx-dev/mcpx#readme"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool        sarifTool         `json:"tool"`
	Invocations []sarifInvocation `json:"invocations"`
	Results     []sarifResult     `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	FullName       string      `json:"fullName,omitempty"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string        `json:"id"`
	Name                 string        `json:"name"`
	ShortDescription     sarifMessage  `json:"shortDescription"`
	FullDescription      sarifMessage  `json:"fullDescription"`
	Help                 sarifMessage  `json:"help"`
	HelpURI              string        `json:"helpUri"`
	DefaultConfiguration sarifRuleConf `json:"defaultConfiguration"`
}

type sarifRuleConf struct {
	Level string `json:"level"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifInvocation struct {
	ExecutionSuccessful bool `json:"executionSuccessful"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations"`
	// PartialFingerprints keep a finding the same finding across runs
	// (code-scanning dashboards track it by this).
	PartialFingerprints map[string]string `json:"partialFingerprints"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical  `json:"physicalLocation"`
	LogicalLocations []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifLogical struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// level maps a check's status to a SARIF result level.
func level(s Status) string {
	if s == Fail {
		return "error"
	}
	return "warning"
}

// WriteSARIF writes r as a SARIF 2.1.0 log: one rule per kind of finding,
// one result per finding, located at the target's URL.
func WriteSARIF(w io.Writer, r Run) error {
	rules := r.Rules()
	index := map[string]int{}
	driver := sarifDriver{Name: "mcpx", FullName: r.Tool, Version: r.Version, InformationURI: InformationURI, Rules: []sarifRule{}}
	for i, rule := range rules {
		index[rule.ID] = i
		driver.Rules = append(driver.Rules, sarifRule{
			ID: rule.ID, Name: rule.Name,
			ShortDescription: sarifMessage{Text: sentence(rule.Short)},
			FullDescription:  sarifMessage{Text: sentence(sentence(rule.Short) + " " + capitalize(rule.Help))},
			Help:             sarifMessage{Text: sentence(capitalize(rule.Help))},
			HelpURI:          InformationURI,
			// A rule's worst finding sets its default level.
			DefaultConfiguration: sarifRuleConf{Level: ruleLevel(r, rule.ID)},
		})
	}
	results := []sarifResult{}
	for _, f := range r.Findings() {
		uri := f.Target.URL
		if uri == "" {
			uri = f.Target.Name
		}
		results = append(results, sarifResult{
			RuleID:    f.Check.Rule.ID,
			RuleIndex: index[f.Check.Rule.ID],
			Level:     level(f.Check.Status),
			Message:   sarifMessage{Text: sentence(f.Target.Name + ": " + f.Check.Name + ": " + f.Check.Message)},
			Locations: []sarifLocation{{
				PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: uri}},
				LogicalLocations: []sarifLogical{{Name: f.Target.Name + "/" + f.Check.Name, Kind: "member"}},
			}},
			PartialFingerprints: map[string]string{"mcpxTargetCheck/v1": f.Target.Name + "|" + f.Check.Name + "|" + f.Check.Rule.ID},
		})
	}
	log := sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{{
		Tool:        sarifTool{Driver: driver},
		Invocations: []sarifInvocation{{ExecutionSuccessful: true}},
		Results:     results,
	}}}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(log)
}

func ruleLevel(r Run, id string) string {
	lv := "warning"
	for _, f := range r.Findings() {
		if f.Check.Rule.ID == id && f.Check.Status == Fail {
			lv = "error"
		}
	}
	return lv
}

// capitalize upper-cases the first letter.
func capitalize(s string) string {
	r := []rune(s)
	if len(r) > 0 {
		r[0] = unicode.ToUpper(r[0])
	}
	return string(r)
}

// sentence ends text with a period, as SARIF viewers expect of messages.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}
