//go:build sabotage

package sabotage

import (
	"os"
	"slices"
	"strings"
)

var which = strings.Split(os.Getenv("STRATA_SABOTAGE"), ",")

// Active reports whether STRATA_SABOTAGE (a comma-separated list) names the sabotage.
func Active(name string) bool { return slices.Contains(which, name) }
