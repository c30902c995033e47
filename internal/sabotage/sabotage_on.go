//go:build sabotage

package sabotage

import "os"

var which = os.Getenv("STRATA_SABOTAGE")

// Active reports whether STRATA_SABOTAGE names the sabotage.
func Active(name string) bool { return which == name }
