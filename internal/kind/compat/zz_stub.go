package compat

type Verdict string

const (
	Accept      Verdict = "accept"
	Acknowledge Verdict = "acknowledge"
	Reject      Verdict = "reject"
)

type Check string

const (
	NoCheck    Check = ""
	Violations Check = "violations"
	Present    Check = "present"
	Absent     Check = "absent"
)

type Change struct {
	Path, Field, Rule   string
	Row                 int
	Ack                 string
	Check               Check
	Keywords            []string
	IfClean, IfAffected Verdict
	Message, WayForward string
}

func Diff(old, new map[string]any) []Change { return nil }
func HasValue(spec any, path string) bool   { return false }
func Lacks(spec any, path string) bool      { return false }

type Impact struct {
	Count  int      `json:"count"`
	Sample []string `json:"sample"`
}
type Ack struct {
	Path string `json:"path"`
	Rule string `json:"rule"`
}
type Report struct {
	Compatible bool      `json:"compatible"`
	Changes    []Finding `json:"changes"`
}
type Finding struct {
	Path, Field, Rule   string
	Row                 int
	Verdict             Verdict
	Acknowledged        bool
	Ack                 string
	Message, WayForward string
	Impact              *Impact
	Against             int `json:"against,omitempty"`
}

func Decide(changes []Change, impacts map[int]Impact, acks []Ack) Report {
	return Report{Compatible: true}
}
