package execapi

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The schemas in docs/ are the contract clients code against; these tests
// keep them and the Go types the same document.

func loadSchema(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile("../docs/schema/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// TestSchemaMatchesTypes: every field of the Go types is in the schema,
// with a compatible type, and the schema has no property the types lack.
func TestSchemaMatchesTypes(t *testing.T) {
	for _, c := range []struct {
		file string
		typ  reflect.Type
	}{
		{"exec-request.v1.json", reflect.TypeFor[Request]()},
		{"exec-response.v1.json", reflect.TypeFor[Response]()},
	} {
		s := loadSchema(t, c.file)
		if got := s["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %v", c.file, got)
		}
		for _, p := range compareType(c.typ, s, "") {
			t.Errorf("%s: %s", c.file, p)
		}
	}
}

func compareType(t reflect.Type, s map[string]any, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	at := path
	if at == "" {
		at = "(root)"
	}
	typ, _ := s["type"].(string)
	var probs []string
	want := ""
	switch t.Kind() {
	case reflect.Struct:
		want = "object"
	case reflect.Map:
		want = "object"
	case reflect.Slice:
		want = "array"
	case reflect.String:
		want = "string"
	case reflect.Bool:
		want = "boolean"
	case reflect.Int, reflect.Int64:
		want = "integer"
	case reflect.Interface:
		return nil
	}
	if typ == "" && s["enum"] != nil && want == "string" {
		typ = "string" // an enum of strings
	}
	if typ != want {
		return []string{fmt.Sprintf("%s: schema type %q, Go %s (%s)", at, typ, t, want)}
	}
	switch t.Kind() {
	case reflect.Struct:
		props, _ := s["properties"].(map[string]any)
		if s["additionalProperties"] != false {
			probs = append(probs, at+": object without additionalProperties false")
		}
		fields := jsonFields(t)
		for name, f := range fields {
			sub, ok := props[name].(map[string]any)
			if !ok {
				probs = append(probs, fmt.Sprintf("%s: Go field %s (%q) missing from the schema", at, f.Name, name))
				continue
			}
			probs = append(probs, compareType(f.Type, sub, join(path, name))...)
		}
		for name := range props {
			if _, ok := fields[name]; !ok {
				probs = append(probs, fmt.Sprintf("%s: schema property %q has no Go field", at, name))
			}
		}
		// Required in the schema exactly when always emitted (no omitempty).
		req := map[string]bool{}
		if r, ok := s["required"].([]any); ok {
			for _, n := range r {
				req[n.(string)] = true
			}
		}
		if t != reflect.TypeFor[Request]() && t != reflect.TypeFor[BindMount]() {
			for name, f := range fields {
				omit := strings.Contains(f.Tag.Get("json"), ",omit")
				if omit == req[name] {
					probs = append(probs, fmt.Sprintf("%s: %q required=%v but omitempty=%v", at, name, req[name], omit))
				}
			}
		}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return probs
		}
		sub, ok := s["additionalProperties"].(map[string]any)
		if !ok {
			return append(probs, at+": map without an additionalProperties schema")
		}
		probs = append(probs, compareType(t.Elem(), sub, path+".*")...)
	case reflect.Slice:
		sub, ok := s["items"].(map[string]any)
		if !ok {
			return append(probs, at+": array without items")
		}
		probs = append(probs, compareType(t.Elem(), sub, path+"[]")...)
	}
	return probs
}

// validate checks v (decoded JSON) against the subset of draft 2020-12
// the schemas use; a keyword it does not know fails, so a schema cannot
// silently outgrow the check.
func validate(s map[string]any, v any, path string) []string {
	var probs []string
	bad := func(format string, a ...any) { probs = append(probs, path+": "+fmt.Sprintf(format, a...)) }
	for k, kw := range s {
		switch k {
		case "$schema", "$id", "title", "description":
		case "type":
			if !isType(v, kw.(string)) {
				bad("%v is not %s", v, kw)
			}
		case "const":
			if fmt.Sprint(v) != fmt.Sprint(kw) {
				bad("%v is not %v", v, kw)
			}
		case "enum":
			found := false
			for _, e := range kw.([]any) {
				found = found || e == v
			}
			if !found {
				bad("%v not in %v", v, kw)
			}
		case "minimum", "maximum":
			if n, ok := v.(float64); ok && (k == "minimum" && n < kw.(float64) || k == "maximum" && n > kw.(float64)) {
				bad("%v violates %s %v", n, k, kw)
			}
		case "pattern":
			if str, ok := v.(string); ok && !regexp.MustCompile(kw.(string)).MatchString(str) {
				bad("%q does not match %s", str, kw)
			}
		case "minLength":
			if str, ok := v.(string); ok && len(str) < int(kw.(float64)) {
				bad("shorter than %v", kw)
			}
		case "minItems", "maxItems":
			if a, ok := v.([]any); ok && (k == "minItems" && len(a) < int(kw.(float64)) || k == "maxItems" && len(a) > int(kw.(float64))) {
				bad("%d items violates %s %v", len(a), k, kw)
			}
		case "items":
			if a, ok := v.([]any); ok {
				for i, e := range a {
					probs = append(probs, validate(kw.(map[string]any), e, fmt.Sprintf("%s[%d]", path, i))...)
				}
			}
		case "required":
			if o, ok := v.(map[string]any); ok {
				for _, n := range kw.([]any) {
					if _, ok := o[n.(string)]; !ok {
						bad("missing required %q", n)
					}
				}
			}
		case "properties", "additionalProperties", "propertyNames":
			o, ok := v.(map[string]any)
			if !ok {
				continue
			}
			props, _ := s["properties"].(map[string]any)
			for name, e := range o {
				sub, declared := props[name].(map[string]any)
				switch {
				case k == "properties" && declared:
					probs = append(probs, validate(sub, e, join(path, name))...)
				case k == "additionalProperties" && !declared && kw == false:
					bad("unknown property %q", name)
				case k == "additionalProperties" && !declared:
					probs = append(probs, validate(kw.(map[string]any), e, join(path, name))...)
				case k == "propertyNames":
					probs = append(probs, validate(kw.(map[string]any), name, path+" key")...)
				}
			}
		default:
			bad("schema keyword %q unknown to the test validator", k)
		}
	}
	sort.Strings(probs)
	return probs
}

func isType(v any, typ string) bool {
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == math.Trunc(n)
	}
	return false
}

func validateJSON(t *testing.T, schema map[string]any, doc []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return validate(schema, v, "")
}

// TestSchemaValidatorRejects: the validator above catches what it claims to.
func TestSchemaValidatorRejects(t *testing.T) {
	resp := loadSchema(t, "exec-response.v1.json")
	req := loadSchema(t, "exec-request.v1.json")
	for _, c := range []struct {
		schema map[string]any
		doc    string
	}{
		{resp, `{}`},
		{resp, `{"api_version":1,"execution_id":"ex-0123456789abcdef","status":"ok","exit_code":0,"stdout":"","stderr":"","stdout_truncated":false,"stderr_truncated":false,"metrics":{"wall_time_ms":0,"user_time_ms":0,"kernel_time_ms":0,"max_memory_bytes":0,"io_bytes_read":0,"io_bytes_written":0},"timestamps":{"received":"","started":"","finished":""}}`},
		{req, `{"command":[]}`},
		{req, `{"command":["x"],"extra":1}`},
		{req, `{"command":["x"],"environment":{"1A":"x"}}`},
		{req, `{"command":["x"],"resources":{"cpu_ms":-1}}`},
		{req, `{"command":["x"],"isolation":{"bind_mounts":[{"source":"/a"}]}}`},
	} {
		if probs := validateJSON(t, c.schema, []byte(c.doc)); len(probs) == 0 {
			t.Errorf("schema accepted %s", c.doc)
		}
	}
}

// TestRequestSchemaAcceptsWhatDecodeAccepts: requests the tests use are
// valid documents.
func TestRequestSchemaAcceptsValidRequests(t *testing.T) {
	req := loadSchema(t, "exec-request.v1.json")
	for _, doc := range []string{
		`{"command":["true"]}`,
		`{"api_version":1,"command":["sh","-c","echo hi"],"environment":{"A_1":"x"},"working_directory":"/tmp","stdin":"x","timeout_ms":5000,
		 "resources":{"memory_bytes":1048576,"max_pids":10,"cpu_ms":100,"disk_bytes":1,"max_output_bytes":10},
		 "isolation":{"network":true,"bind_mounts":[{"source":"/srv","destination":"/mnt/srv","readonly":true}]},"branch":"b","at":"main~1","snapshot":false}`,
	} {
		if probs := validateJSON(t, req, []byte(doc)); len(probs) > 0 {
			t.Errorf("%s: %v", doc, probs)
		}
		if _, e := Decode([]byte(doc)); e != nil {
			t.Errorf("Decode refused %s: %v", doc, e)
		}
	}
}

// TestDocsListEveryCode: docs/exec-api.md has a row for every code, with
// its title, and no row for a code that does not exist.
func TestDocsListEveryCode(t *testing.T) {
	data, err := os.ReadFile("../docs/exec-api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[Code]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(E\\d{4})` \\| ([^|]+) \\|").FindAllStringSubmatch(string(data), -1) {
		rows[Code(m[1])] = strings.TrimSpace(m[2])
	}
	for _, c := range Codes() {
		if got, ok := rows[c]; !ok {
			t.Errorf("docs/exec-api.md lacks code %s", c)
		} else if got != c.Title() {
			t.Errorf("%s: docs say %q, code says %q", c, got, c.Title())
		}
		delete(rows, c)
	}
	for c := range rows {
		t.Errorf("docs/exec-api.md documents unknown code %s", c)
	}
}
