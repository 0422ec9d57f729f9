package report

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// InGitHubActions reports whether the process runs in a GitHub Actions job.
func InGitHubActions() bool { return os.Getenv("GITHUB_ACTIONS") == "true" }

// WriteGitHubAnnotations writes one workflow command per finding
// (::error for failures, ::warning for warnings), which the Actions runner
// turns into annotations on the run; a finding whose target is declared in
// a file under Run.Root is annotated on that line.
func WriteGitHubAnnotations(w io.Writer, r Run) error {
	for _, f := range r.Findings() {
		cmd := "warning"
		if f.Check.Status == Fail {
			cmd = "error"
		}
		title := f.Check.Rule.Name + " (" + f.Check.Rule.ID + ")"
		msg := f.Target.Name + ": " + f.Check.Name + ": " + f.Check.Message
		if f.Check.Rule.Help != "" {
			msg += "\nFix: " + f.Check.Rule.Help
		}
		props := "title=" + escapeProperty(title)
		if src := f.Target.Source; src != nil {
			if rel := src.Relative(r.Root); rel != "" {
				props = fmt.Sprintf("file=%s,line=%d,col=%d,%s", escapeProperty(rel), src.Line, src.Column, props)
			}
		}
		if _, err := fmt.Fprintf(w, "::%s %s::%s\n", cmd, props, escapeData(msg)); err != nil {
			return err
		}
	}
	return nil
}

// escapeData escapes a workflow command's message.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeProperty escapes a workflow command's property value.
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
