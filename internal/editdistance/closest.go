package editdistance

import "strings"

// Closest is the candidate nearest to word (ignoring case), when it is near
// enough to be a typo: at most 2 edits, 3 for words longer than 6 bytes,
// and fewer edits than the word is long. A candidate that starts with word
// (a name typed short, "ech" for "echo") counts as one edit. "" when none
// is near.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestD := "", 1<<30
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := Levenshtein(w, lc)
		if w != "" && strings.HasPrefix(lc, w) && d > 1 {
			d = 1
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := 2
	if len(word) > 6 {
		limit = 3
	}
	if best == "" || best == word || bestD > limit || bestD >= len(word) {
		return ""
	}
	return best
}

// DidYouMean is ` (did you mean "X"?)` for the closest candidate, or "".
func DidYouMean(word string, candidates []string) string {
	if c := Closest(word, candidates); c != "" {
		return ` (did you mean "` + c + `"?)`
	}
	return ""
}
