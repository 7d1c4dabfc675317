package ec2sim

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
)

// paginate cuts one page from items (sorted by key) following MaxResults
// and NextToken. The token names the last key served and a fingerprint of
// the other parameters, so it resumes correctly when items come and go and
// is refused if the query changed.
func paginate[T any](p params, items []T, key func(T) string, minMax, maxMax int) ([]T, string, error) {
	limit, hasLimit, err := p.integer("MaxResults")
	if err != nil {
		return nil, "", err
	}
	if hasLimit && (limit < minMax || limit > maxMax) {
		return nil, "", errBadValue("MaxResults", itoa(limit), fmt.Sprintf("Must be between %d and %d.", minMax, maxMax))
	}
	fp := queryFingerprint(p.v)
	start := 0
	if tok, ok := p.get("NextToken"); ok {
		after, err := decodeToken(tok, fp)
		if err != nil {
			return nil, "", err
		}
		for start < len(items) && key(items[start]) <= after {
			start++
		}
	}
	items = items[start:]
	if !hasLimit || len(items) <= limit {
		return items, "", nil
	}
	page := items[:limit]
	return page, encodeToken(fp, key(page[len(page)-1])), nil
}

func queryFingerprint(v url.Values) string {
	rest := url.Values{}
	for k, vs := range v {
		switch k {
		case "MaxResults", "NextToken", "Version":
		default:
			rest[k] = vs
		}
	}
	h := fnv.New64a()
	h.Write([]byte(rest.Encode()))
	return fmt.Sprintf("%016x", h.Sum64())
}

func encodeToken(fp, after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fp + "|" + after))
}

func decodeToken(tok, fp string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	got, after, ok := strings.Cut(string(raw), "|")
	if err != nil || !ok || got != fp {
		return "", errBadValue("NextToken", tok, "The token is invalid or was issued for a different query.")
	}
	return after, nil
}
