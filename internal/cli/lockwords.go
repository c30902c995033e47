package cli

import (
	"fmt"
	"strings"

	"github.com/stratahq/strata/client"
)

// lockWords is the one way the CLI reports a Terraform lock in its way, whichever command met
// it (state lock, push, restore, project encrypt, …): the workspace, the holder, and the
// command that frees it. The server's 423 body is the bare LockInfo terraform expects, which
// would otherwise reach the user as JSON without the workspace or the way out.
func lockWords(err error) (string, bool) {
	l, ok := client.LockOf(err)
	if !ok || l.Project == "" || l.Workspace == "" {
		return "", false
	}
	return fmt.Sprintf("%s; free it with strata state unlock %s %s %s", l, shellWord(l.Project), shellWord(l.Workspace), shellWord(l.Holder.ID)), true
}

// shellWord quotes s for a shell when it holds anything but the characters names and lock
// IDs are made of, so the printed command can be pasted as is.
func shellWord(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':') {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
