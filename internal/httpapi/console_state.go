package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/fault"
)

// Console pages of Terraform state and of the kind registry (console.go has the frame).

func (a *API) uiProjects(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	var list api.ProjectList
	if _, err := a.consoleCall(r, s, "GET", "/v1/projects?limit=200", nil, &list); err != nil {
		return err
	}
	return a.uiShow(w, s, "projects", "state", "Terraform projects", list, "")
}

func (a *API) uiWorkspaces(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	project := r.PathValue("project")
	var list api.WorkspaceList
	if _, err := a.consoleCall(r, s, "GET", "/v1/state/"+url.PathEscape(project)+"?limit=200", nil, &list); err != nil {
		return err
	}
	return a.uiShow(w, s, "workspaces", "state", "Project "+project, map[string]any{"Project": project, "Items": list.Items}, "")
}

type workspaceView struct {
	Project, Workspace string
	Lock               api.LockStatus
	CanForce           bool
	Versions           []api.StateVersion
	A, B               int64
	Diff               *stateDiff
}

func (a *API) workspaceView(r *http.Request, s auth.Session) (workspaceView, error) {
	v := workspaceView{Project: r.PathValue("project"), Workspace: r.PathValue("workspace")}
	base := "/v1/state/" + url.PathEscape(v.Project) + "/" + url.PathEscape(v.Workspace)
	if _, err := a.consoleCall(r, s, "GET", base+"/lock", nil, &v.Lock); err != nil {
		return v, err
	}
	var versions struct {
		Items []api.StateVersion `json:"items"`
	}
	if _, err := a.consoleCall(r, s, "GET", base+"/versions?limit=100", nil, &versions); err != nil {
		return v, err
	}
	v.Versions = versions.Items
	v.CanForce = s.Principal.Allows("state", "force-unlock", v.Project) && a.mayCall(r, s, "DELETE", base+"/lock")
	q := r.URL.Query()
	if q.Get("a") != "" && q.Get("b") != "" {
		x, errA := strconv.ParseInt(q.Get("a"), 10, 64)
		y, errB := strconv.ParseInt(q.Get("b"), 10, 64)
		if errA != nil || errB != nil {
			return v, fault.Invalid("a", "versions to compare are numbers")
		}
		v.A, v.B = x, y
		var before, after []byte
		if _, err := a.consoleCall(r, s, "GET", fmt.Sprintf("%s/versions/%d", base, x), nil, &before); err != nil {
			return v, err
		}
		if _, err := a.consoleCall(r, s, "GET", fmt.Sprintf("%s/versions/%d", base, y), nil, &after); err != nil {
			return v, err
		}
		d, err := diffStates(before, after)
		if err != nil {
			return v, err
		}
		v.Diff = d
	} else if len(v.Versions) >= 2 {
		// The two newest versions, older first, whichever order the list has.
		ns := make([]int64, len(v.Versions))
		for i, ver := range v.Versions {
			ns[i] = ver.N
		}
		sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
		v.A, v.B = ns[len(ns)-2], ns[len(ns)-1]
	}
	return v, nil
}

func (a *API) uiWorkspace(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	v, err := a.workspaceView(r, s)
	if err != nil {
		return err
	}
	notice := ""
	if r.URL.Query().Get("unlocked") != "" {
		notice = "The lock was force-unlocked (audited as state.force-unlock)."
	}
	return a.uiShow(w, s, "workspace", "state", v.Project+" / "+v.Workspace, v, notice)
}

// uiForceUnlock releases a lock whoever holds it, after the confirmation the form asks for
// (the workspace's name typed again); the API checks state:force-unlock and audits it.
func (a *API) uiForceUnlock(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	project, workspace := r.PathValue("project"), r.PathValue("workspace")
	if r.PostFormValue("confirm") != workspace {
		v, err := a.workspaceView(r, s)
		if err != nil {
			return err
		}
		return a.render(w, http.StatusBadRequest, "workspace", uiPage{Title: project + " / " + workspace, User: s.Principal.Name, CSRF: s.CSRF, Section: "state", Data: v,
			Error: "Type the workspace's name to confirm the force-unlock; nothing was changed."})
	}
	base := "/v1/state/" + url.PathEscape(project) + "/" + url.PathEscape(workspace)
	if _, err := a.consoleCall(r, s, "DELETE", base+"/lock?force=true", nil, nil); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/state/"+url.PathEscape(project)+"/"+url.PathEscape(workspace)+"?unlocked=1", http.StatusSeeOther)
	return nil
}

// stateDiff compares two Terraform states by resource address.
type stateDiff struct {
	Added, Removed []string
	Changed        []resourceChange
	Outputs        []attrChange
}

type resourceChange struct {
	Address string
	Attrs   []attrChange
}

type attrChange struct {
	Name, Old, New string
}

// masked stands in for a sensitive value: a diff says that it changed, never what to.
const masked = "(sensitive)"

type tfState struct {
	Outputs   map[string]tfOutput `json:"outputs"`
	Resources []struct {
		Module    string `json:"module"`
		Mode      string `json:"mode"`
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			IndexKey            any             `json:"index_key"`
			Attributes          map[string]any  `json:"attributes"`
			SensitiveAttributes json.RawMessage `json:"sensitive_attributes"`
		} `json:"instances"`
	} `json:"resources"`
}

type tfOutput struct {
	Value     any  `json:"value"`
	Sensitive bool `json:"sensitive"`
}

// instances maps every resource instance's address to its attributes as display strings,
// sensitive ones masked.
func (st tfState) instances() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, res := range st.Resources {
		addr := res.Type + "." + res.Name
		if res.Mode == "data" {
			addr = "data." + addr
		}
		if res.Module != "" {
			addr = res.Module + "." + addr
		}
		for _, inst := range res.Instances {
			a := addr
			switch k := inst.IndexKey.(type) {
			case string:
				a += "[" + strconv.Quote(k) + "]"
			case float64:
				a += "[" + strconv.FormatFloat(k, 'f', -1, 64) + "]"
			}
			sensitive := sensitiveTop(inst.SensitiveAttributes)
			attrs := map[string]string{}
			for k, v := range inst.Attributes {
				if sensitive[k] {
					attrs[k] = masked
					continue
				}
				b, _ := json.Marshal(v)
				attrs[k] = string(b)
			}
			out[a] = attrs
		}
	}
	return out
}

// sensitiveTop reads the top-level attribute names of a state's sensitive_attributes (paths
// of steps, [[{"type":"get_attr","value":"password"}]]): the whole attribute is masked.
func sensitiveTop(raw json.RawMessage) map[string]bool {
	out := map[string]bool{}
	var paths [][]struct {
		Type  string `json:"type"`
		Value any    `json:"value"`
	}
	if json.Unmarshal(raw, &paths) == nil {
		for _, p := range paths {
			if len(p) > 0 {
				if name, ok := p[0].Value.(string); ok {
					out[name] = true
				}
			}
		}
	}
	// Terraform 1.10+ writes [{"type":"get_attr","value":"password"}] per path as objects.
	var flat []struct {
		Type  string `json:"type"`
		Value any    `json:"value"`
	}
	if json.Unmarshal(raw, &flat) == nil {
		for _, p := range flat {
			if name, ok := p.Value.(string); ok {
				out[name] = true
			}
		}
	}
	return out
}

func diffStates(before, after []byte) (*stateDiff, error) {
	var x, y tfState
	if err := json.Unmarshal(before, &x); err != nil {
		return nil, fault.Invalid("a", "that version is not a readable Terraform state")
	}
	if err := json.Unmarshal(after, &y); err != nil {
		return nil, fault.Invalid("b", "that version is not a readable Terraform state")
	}
	d := &stateDiff{}
	xi, yi := x.instances(), y.instances()
	for addr := range yi {
		if _, ok := xi[addr]; !ok {
			d.Added = append(d.Added, addr)
		}
	}
	for addr, xa := range xi {
		ya, ok := yi[addr]
		if !ok {
			d.Removed = append(d.Removed, addr)
			continue
		}
		if ch := diffAttrs(xa, ya); len(ch) > 0 {
			d.Changed = append(d.Changed, resourceChange{Address: addr, Attrs: ch})
		}
	}
	sort.Strings(d.Added)
	sort.Strings(d.Removed)
	sort.Slice(d.Changed, func(i, j int) bool { return d.Changed[i].Address < d.Changed[j].Address })
	show := func(o tfOutput, ok bool) string {
		if !ok {
			return ""
		}
		if o.Sensitive {
			return masked
		}
		b, _ := json.Marshal(o.Value)
		return string(b)
	}
	names := map[string]bool{}
	for n := range x.Outputs {
		names[n] = true
	}
	for n := range y.Outputs {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		ox, okx := x.Outputs[n]
		oy, oky := y.Outputs[n]
		a, b := show(ox, okx), show(oy, oky)
		if a != b || (a == masked && b == masked && !jsonEqual(ox.Value, oy.Value)) {
			d.Outputs = append(d.Outputs, attrChange{Name: n, Old: a, New: b})
		}
	}
	return d, nil
}

func diffAttrs(x, y map[string]string) []attrChange {
	names := map[string]bool{}
	for k := range x {
		names[k] = true
	}
	for k := range y {
		names[k] = true
	}
	var out []attrChange
	for _, k := range slices.Sorted(maps.Keys(names)) {
		if x[k] != y[k] {
			out = append(out, attrChange{Name: k, Old: x[k], New: y[k]})
		}
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// --- kinds ---

func (a *API) uiKinds(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	var list struct {
		Items []api.KindInfo `json:"items"`
	}
	if _, err := a.consoleCall(r, s, "GET", "/v1/kinds", nil, &list); err != nil {
		return err
	}
	return a.uiShow(w, s, "kinds", "kinds", "Kinds", list.Items, "")
}

type kindView struct {
	Kind      api.KindInfo
	Revisions []api.KindRevision
	Schema    string
	CanWrite  bool
	DryRun    *api.KindResult
	ObjectsAt string
}

func (a *API) kindView(r *http.Request, s auth.Session) (kindView, error) {
	name := r.PathValue("kind")
	v := kindView{}
	if _, err := a.consoleCall(r, s, "GET", "/v1/kinds/"+url.PathEscape(name), nil, &v.Kind); err != nil {
		return v, err
	}
	var revs struct {
		Items []api.KindRevision `json:"items"`
	}
	if _, err := a.consoleCall(r, s, "GET", "/v1/kinds/"+url.PathEscape(name)+"/revisions", nil, &revs); err != nil {
		return v, err
	}
	// Newest first: the latest report is what a reader looks for.
	for i := len(revs.Items) - 1; i >= 0; i-- {
		v.Revisions = append(v.Revisions, revs.Items[i])
	}
	v.Schema = prettyJSON(v.Kind.Schema)
	v.CanWrite = !v.Kind.Builtin && a.mayCall(r, s, "PUT", "/v1/kinds/"+url.PathEscape(name))
	switch {
	case v.Kind.Name == "Node":
		v.ObjectsAt = "/ui/nodes"
	case v.Kind.Name == "Org":
		v.ObjectsAt = "/ui/orgs"
	case v.Kind.Scope == "global" && !v.Kind.Builtin:
		v.ObjectsAt = "/ui/resources/" + url.PathEscape(v.Kind.Name)
	}
	return v, nil
}

func (a *API) uiKind(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	v, err := a.kindView(r, s)
	if err != nil {
		return err
	}
	return a.uiShow(w, s, "kind", "kinds", "Kind "+v.Kind.Name, v, "")
}

// uiKindDryRun checks a new schema for the kind without registering it and shows the report
// (the affected objects the token may read).
func (a *API) uiKindDryRun(w http.ResponseWriter, r *http.Request, s auth.Session) error {
	v, err := a.kindView(r, s)
	if err != nil {
		return err
	}
	schema := r.PostFormValue("schema")
	v.Schema = schema
	body, _ := json.Marshal(map[string]json.RawMessage{"schema": json.RawMessage(strings.TrimSpace(schema))})
	if !json.Valid([]byte(strings.TrimSpace(schema))) {
		return a.render(w, http.StatusBadRequest, "kind", uiPage{Title: "Kind " + v.Kind.Name, User: s.Principal.Name, CSRF: s.CSRF, Section: "kinds", Data: v, Error: "The schema is not JSON."})
	}
	var res api.KindResult
	if _, err := a.consoleCall(r, s, "PUT", "/v1/kinds/"+url.PathEscape(v.Kind.Name)+"?dryRun=true", body, &res); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.status < 500 && ae.status != http.StatusNotFound {
			if ae.problem.Report != nil {
				res.Report = *ae.problem.Report
				v.DryRun = &res
			}
			return a.render(w, ae.status, "kind", uiPage{Title: "Kind " + v.Kind.Name, User: s.Principal.Name, CSRF: s.CSRF, Section: "kinds", Data: v, Error: ae.problem.Detail, Fields: ae.problem.Errors})
		}
		return err
	}
	v.DryRun = &res
	return a.uiShow(w, s, "kind", "kinds", "Kind "+v.Kind.Name, v, "Dry run: nothing was registered.")
}
