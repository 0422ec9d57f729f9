package upstream

import (
	"os"
	"sort"
)

// baseEnv lists the variables a stdio child inherits from the daemon:
// enough to find programs and a home, nothing that could hold a secret.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL", "TERM", "SYSTEMROOT"}

// childEnv is the minimal base plus the server's configured env, which wins.
func childEnv(configured map[string]string) []string {
	m := map[string]string{}
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, v := range configured {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
