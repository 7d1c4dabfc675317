package ipamd

import (
	"fmt"
	"sort"
	"strings"
)

// promqlFunctions are PromQL's functions and aggregation operators: an
// identifier followed by "(" must be one of them.
var promqlFunctions = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`
		abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes clamp clamp_max clamp_min
		cos cosh count_over_time day_of_month day_of_week day_of_year days_in_month deg delta deriv
		double_exponential_smoothing exp floor histogram_avg histogram_count histogram_fraction histogram_quantile
		histogram_stddev histogram_stdvar histogram_sum holt_winters hour idelta increase info irate label_join
		label_replace last_over_time ln log10 log2 mad_over_time max_over_time min_over_time minute month pi
		predict_linear present_over_time quantile_over_time rad rate resets round scalar sgn sin sinh sort
		sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh
		time timestamp vector year start end
		avg bottomk count count_values group limit_ratio limitk max min quantile stddev stdvar sum topk`) {
		promqlFunctions[f] = true
	}
}

// promqlGroupings take a parenthesised list of label names.
var promqlGroupings = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// promqlAggregations may put by/without before their parenthesised argument.
var promqlAggregations = map[string]bool{}

func init() {
	for _, a := range strings.Fields("avg bottomk count count_values group limit_ratio limitk max min quantile stddev stdvar sum topk") {
		promqlAggregations[a] = true
	}
}

// nextWordIsGrouping reports whether the word starting at i is by or without.
func nextWordIsGrouping(s string, i int) bool {
	j := i
	for j < len(s) && isIdentChar(s[j]) {
		j++
	}
	w := strings.ToLower(s[i:j])
	return w == "by" || w == "without"
}

// promqlKeywords are the other words PromQL reserves.
var promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true, "inf": true, "nan": true}

// promqlMetricNames returns the metric names a Grafana PromQL expression
// selects, sorted and without repeats. It skips what cannot be a metric
// name: string literals, label matchers ({...}), ranges and subqueries
// ([...]), label lists of by/without/on/ignoring/group_left/group_right,
// numbers and durations, keywords, and Grafana variables ($var, ${var}).
// An identifier called like a function must be a PromQL function, so a
// typo there is an error rather than a silently unchecked name.
func promqlMetricNames(expr string) ([]string, error) {
	seen := map[string]bool{}
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, err := skipBalanced(s, i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end, err := skipBalanced(s, i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$':
			i = skipVariable(s, i)
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			for i < len(s) && (isIdentChar(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdentChar(s[i]) {
				i++
			}
			word := s[start:i]
			next := i
			for next < len(s) && (s[next] == ' ' || s[next] == '\t' || s[next] == '\n') {
				next++
			}
			calls := next < len(s) && s[next] == '('
			lower := strings.ToLower(word)
			switch {
			case promqlGroupings[lower]:
				if calls {
					end, err := skipBalanced(s, next, '(', ')')
					if err != nil {
						return nil, err
					}
					i = end
				}
			case promqlKeywords[lower]:
			case promqlAggregations[word] && nextWordIsGrouping(s, next):
				// sum by (le) (...): the aggregation's argument follows its grouping.
			case calls:
				if !promqlFunctions[word] {
					return nil, fmt.Errorf("%q at offset %d is called but is not a PromQL function", word, start)
				}
			default:
				seen[word] = true
			}
		default:
			i++
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// labelValuesMetric is the metric a Grafana variable query
// label_values(<selector>, <label>) reads; label_values(<label>) reads none.
func labelValuesMetric(query string) ([]string, error) {
	q := strings.TrimSpace(query)
	inner, ok := strings.CutPrefix(q, "label_values(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return nil, fmt.Errorf("variable query %q is not label_values(...)", query)
	}
	inner = strings.TrimSuffix(inner, ")")
	comma := strings.LastIndexByte(inner, ',')
	if comma < 0 {
		return nil, nil
	}
	return promqlMetricNames(inner[:comma])
}

func skipString(s string, i int) (int, error) {
	quote := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && quote != '`':
			j++
		case s[j] == quote:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at offset %d", i)
}

// skipBalanced returns the offset after the close matching the open at i,
// ignoring brackets inside strings.
func skipBalanced(s string, i int, open, close byte) (int, error) {
	depth := 0
	for j := i; j < len(s); {
		switch s[j] {
		case '"', '\'', '`':
			end, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = end
			continue
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
		j++
	}
	return 0, fmt.Errorf("unbalanced %c at offset %d", open, i)
}

// skipVariable skips $name, ${name} or ${name:format} from i.
func skipVariable(s string, i int) int {
	j := i + 1
	if j < len(s) && s[j] == '{' {
		if end := strings.IndexByte(s[j:], '}'); end >= 0 {
			return j + end + 1
		}
		return len(s)
	}
	for j < len(s) && isIdentChar(s[j]) {
		j++
	}
	return j
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }
