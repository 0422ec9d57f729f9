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
	// OriginalURIBaseIDs says where %SRCROOT%, the base of relative
	// locations, is.
	OriginalURIBaseIDs map[string]sarifArtifact `json:"originalUriBaseIds,omitempty"`
	Results            []sarifResult            `json:"results"`
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
	Properties          *sarifProperties  `json:"properties,omitempty"`
}

// sarifProperties is a result's property bag: the endpoint the finding is
// about (its location is the line that declares it).
type sarifProperties struct {
	URL string `json:"url"`
}

type sarifLocation struct {
	PhysicalLocation *sarifPhysical `json:"physicalLocation,omitempty"`
	LogicalLocations []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           sarifRegion   `json:"region"`
}

type sarifArtifact struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn"`
	EndLine     int `json:"endLine"`
	EndColumn   int `json:"endColumn"`
}

type sarifLogical struct {
	Name               string `json:"name"`
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

// srcRoot is the uriBaseId of locations relative to Run.Root.
const srcRoot = "%SRCROOT%"

// level maps a check's status to a SARIF result level.
func level(s Status) string {
	if s == Fail {
		return "error"
	}
	return "warning"
}

// WriteSARIF writes r as a SARIF 2.1.0 log: one rule per kind of finding,
// one result per finding. A finding's logical location is its endpoint
// (the URL, also in the result's properties); its physical location is
// the line that declares the target (relative to Run.Root when the file
// lies under it), because code scanning shows only findings in files and
// rejects an upload whose absolute locations are not file: URIs. A target
// named on the command line has the logical location only.
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
	relative := false
	for _, f := range r.Findings() {
		// The endpoint itself is the logical location: its URL when known.
		endpoint := sarifLogical{Name: f.Target.Name, FullyQualifiedName: f.Target.URL, Kind: "resource"}
		if endpoint.FullyQualifiedName == "" {
			endpoint.FullyQualifiedName = f.Target.Name
		}
		loc := sarifLocation{LogicalLocations: []sarifLogical{endpoint}}
		if src := f.Target.Source; src != nil {
			uri, rel := src.uri(r.Root)
			art := sarifArtifact{URI: uri}
			if rel {
				art.URIBaseID, relative = srcRoot, true
			}
			loc.PhysicalLocation = &sarifPhysical{ArtifactLocation: art, Region: sarifRegion{
				StartLine: src.Line, StartColumn: src.Column, EndLine: src.Line, EndColumn: src.EndColumn,
			}}
		}
		res := sarifResult{
			RuleID:              f.Check.Rule.ID,
			RuleIndex:           index[f.Check.Rule.ID],
			Level:               level(f.Check.Status),
			Message:             sarifMessage{Text: sentence(f.Target.Name + ": " + f.Check.Name + ": " + f.Check.Message)},
			Locations:           []sarifLocation{loc},
			PartialFingerprints: map[string]string{"mcpxTargetCheck/v1": f.Target.Name + "|" + f.Check.Name + "|" + f.Check.Rule.ID},
		}
		if f.Target.URL != "" {
			res.Properties = &sarifProperties{URL: f.Target.URL}
		}
		results = append(results, res)
	}
	run := sarifRun{
		Tool:        sarifTool{Driver: driver},
		Invocations: []sarifInvocation{{ExecutionSuccessful: true}},
		Results:     results,
	}
	if relative {
		run.OriginalURIBaseIDs = map[string]sarifArtifact{srcRoot: {URI: rootURI(r.Root)}}
	}
	log := sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{run}}
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
