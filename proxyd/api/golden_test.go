package api

import (
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// wireTypes is every type that travels over the socket. Each has a golden
// file of its JSON with every field set, so renaming or dropping a field
// fails a test: the contract is additive only.
var wireTypes = map[string]any{
	"ActivityRecord":      ActivityRecord{},
	"ActivitySummaryRow":  ActivitySummaryRow{},
	"AdHocTarget":         AdHocTarget{},
	"AuthStatus":          AuthStatus{},
	"CallCancel":          CallCancel{},
	"CallError":           CallError{},
	"CallEvent":           CallEvent{},
	"CallInput":           CallInput{},
	"CallRequest":         CallRequest{},
	"CallResponse":        CallResponse{},
	"ConnectInfo":         ConnectInfo{},
	"DrillFailure":        DrillFailure{},
	"DrillOutcome":        DrillOutcome{},
	"ErrorBody":           ErrorBody{},
	"ErrorDetail":         ErrorDetail{},
	"Health":              Health{},
	"InputError":          InputError{},
	"InputEvent":          InputEvent{},
	"LogEvent":            LogEvent{},
	"LoginConnection":     LoginConnection{},
	"LoginEvent":          LoginEvent{},
	"LoginRequest":        LoginRequest{},
	"LoginResult":         LoginResult{},
	"LogoutRequest":       LogoutRequest{},
	"LogoutResult":        LogoutResult{},
	"ProbeReport":         ProbeReport{},
	"ProbeRequest":        ProbeRequest{},
	"ProbeResult":         ProbeResult{},
	"ProbeStep":           ProbeStep{},
	"ProgressEvent":       ProgressEvent{},
	"RefreshDrillEvent":   RefreshDrillEvent{},
	"RefreshDrillReport":  RefreshDrillReport{},
	"RefreshDrillRequest": RefreshDrillRequest{},
	"RefusedEvent":        RefusedEvent{},
	"ReloadResponse":      ReloadResponse{},
	"ServerStatus":        ServerStatus{},
	"SessionDrillEvent":   SessionDrillEvent{},
	"SessionDrillReport":  SessionDrillReport{},
	"SessionDrillRequest": SessionDrillRequest{},
	"SetTokenRequest":     SetTokenRequest{},
	"Resource":            Resource{},
	"Prompt":              Prompt{},
	"PromptArgument":      PromptArgument{},
	"RPCRequest":          RPCRequest{},
	"RPCResponse":         RPCResponse{},
	"SetTokenResult":      SetTokenResult{},
	"ShutdownResponse":    ShutdownResponse{},
	"Status":              Status{},
	"Tool":                Tool{},
}

// notOnTheWire are the package's struct types that are not JSON: the
// client, its errors, and the activity query (it travels as query
// parameters, tested by TestActivityQueryRoundTrip).
var notOnTheWire = map[string]bool{"Client": true, "NotRunningError": true, "Error": true, "Stream": true, "ActivityQuery": true, "DrillEvent": true}

func TestWireTypesGolden(t *testing.T) {
	for name, v := range wireTypes {
		t.Run(name, func(t *testing.T) {
			p := reflect.New(reflect.TypeOf(v))
			fill(p.Elem(), 0)
			got, err := json.MarshalIndent(p.Interface(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("no golden file (run go test ./proxyd/api -update to write it): %v", err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s's JSON changed; fields may be added, never renamed or removed (update the golden file with -update only for additions):\n--- got\n%s\n--- want\n%s", name, got, want)
			}
			// And it reads back into the same value.
			back := reflect.New(reflect.TypeOf(v))
			if err := json.Unmarshal(want, back.Interface()); err != nil {
				t.Fatalf("golden JSON does not decode: %v", err)
			}
			again, _ := json.MarshalIndent(back.Interface(), "", "  ")
			if string(append(again, '\n')) != string(want) {
				t.Fatalf("round trip differs:\n%s", again)
			}
		})
	}
}

// TestEveryWireTypeHasAGolden keeps wireTypes complete: a new struct type
// in the package is either on the wire (and needs a golden file) or is
// listed in notOnTheWire.
func TestEveryWireTypeHasAGolden(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); !isStruct || !ts.Name.IsExported() {
					if _, isIdx := ts.Type.(*ast.IndexExpr); !isIdx || ts.Assign == 0 {
						continue
					}
				}
				if _, ok := wireTypes[ts.Name.Name]; !ok && !notOnTheWire[ts.Name.Name] {
					t.Errorf("type %s has no golden file: add it to wireTypes (or to notOnTheWire)", ts.Name.Name)
				}
			}
		}
	}
}

// fill sets every field of v to a value that is not zero, so that no
// field is left out by omitempty: strings name their field, numbers are 1,
// times one fixed instant, lists and maps hold one element.
func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fillNamed(v.Field(i), v.Type().Field(i).Name, depth+1)
			}
		}
	default:
		fillNamed(v, "value", depth)
	}
}

func fillNamed(v reflect.Value, name string, depth int) {
	if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
		v.Set(reflect.ValueOf(json.RawMessage(`{"raw":true}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strings.ToLower(name))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Struct:
		fill(v, depth)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillNamed(p.Elem(), name, depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillNamed(s.Index(0), name, depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fillNamed(k, name, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fillNamed(e, name, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf(name))
	}
}

func TestActivityQueryRoundTrip(t *testing.T) {
	q := ActivityQuery{Servers: []string{"a", "b"}, Tools: []string{"t"}, Statuses: []string{StatusError},
		ErrorClasses: []string{"http"}, FaultDomains: []string{"upstream"},
		Since: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Until: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), Limit: 7}
	got, err := ParseActivityQuery(q.Values())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, q) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, q)
	}
	if enc := q.Values().Encode(); enc != "error_class=http&fault_domain=upstream&limit=7&server=a&server=b&since=2026-01-02T03%3A04%3A05.000000006Z&status=error&tool=t&until=2026-01-03T00%3A00%3A00Z" {
		t.Fatalf("query parameters changed: %s", enc)
	}
	for _, bad := range []string{"since=yesterday", "until=1h", "limit=-1", "limit=x"} {
		v, _ := url.ParseQuery(bad)
		if _, err := ParseActivityQuery(v); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if got, _ := ParseActivityQuery(url.Values{"server": {"a,b", " c ", ""}}); !reflect.DeepEqual(got.Servers, []string{"a", "b", "c"}) {
		t.Errorf("lists: %v", got.Servers)
	}
}
