package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/stratahq/strata/client"
	"github.com/stratahq/strata/internal/testserver"
)

// exampleServer starts a strata API on a throwaway database for an example to talk to (go
// test runs the examples against it). A program uses its server's URL and a token instead:
// client.New("https://strata.example.com", os.Getenv("STRATA_TOKEN"), nil).
func exampleServer() (server, token string, stop func()) {
	s, err := testserver.StartDetached()
	if err != nil {
		log.Fatal(err)
	}
	return s.URL, s.Token, s.Close
}

// Connect, create an org and a node, and read the node back.
func Example() {
	server, token, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c, err := client.New(server, token, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}}); err != nil {
		log.Fatal(err)
	}
	_, err = c.Nodes().Create(ctx, client.Object{
		Metadata: client.ObjectMeta{Name: "web01", Labels: map[string]string{"role": "web"}},
		Spec:     json.RawMessage(`{"org":"acme"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	n, err := c.Nodes().Get(ctx, "web01")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n.Kind, n.Metadata.Name, n.Metadata.Labels["role"], string(n.Spec))

	// Errors are *client.Error; the Is… helpers tell them apart.
	_, err = c.Nodes().Get(ctx, "web99")
	fmt.Println(client.IsNotFound(err))
	// Output:
	// Node web01 web {"org":"acme"}
	// true
}

// List the nodes whose labels match a selector, a page at a time.
func ExampleResources_List() {
	server, token, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(server, token, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}}); err != nil {
		log.Fatal(err)
	}
	for _, n := range []struct{ name, env string }{{"db01", "prod"}, {"web01", "prod"}, {"web02", "dev"}, {"web03", "prod"}} {
		_, err := c.Nodes().Create(ctx, client.Object{
			Metadata: client.ObjectMeta{Name: n.name, Labels: map[string]string{"env": n.env, "role": n.name[:len(n.name)-2]}},
			Spec:     json.RawMessage(`{"org":"acme"}`),
		})
		if err != nil {
			log.Fatal(err)
		}
	}

	opts := client.ListOptions{LabelSelector: "env=prod,role in (web)", Limit: 1}
	for {
		page, err := c.Nodes().List(ctx, opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, n := range page.Items {
			fmt.Println(n.Metadata.Name)
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue // the next page of the same list
	}
	// Output:
	// web01
	// web03
}

// Set pillar data at the org and at one node, and render the node's merged pillar: what Salt
// gets for the minion.
func ExampleClient_PillarRender() {
	server, token, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(server, token, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Nodes().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "web01"}, Spec: json.RawMessage(`{"org":"acme"}`)}); err != nil {
		log.Fatal(err)
	}
	org := client.PillarTarget{Org: "acme"}
	if _, err := c.PillarSet(ctx, org, "ntp", json.RawMessage(`{"ntp":{"servers":["0.pool.ntp.org"],"maxpoll":10}}`), ""); err != nil {
		log.Fatal(err)
	}
	web01 := client.PillarTarget{Node: "web01"}
	if _, err := c.PillarSet(ctx, web01, "ntp", json.RawMessage(`{"ntp":{"maxpoll":6}}`), ""); err != nil {
		log.Fatal(err)
	}

	pillar, err := c.PillarRender(ctx, "web01", false)
	if err != nil {
		log.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, pillar, "", "  "); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.String())
	// Output:
	// {
	//   "ntp": {
	//     "maxpoll": 6,
	//     "servers": [
	//       "0.pool.ntp.org"
	//     ]
	//   }
	// }
}

// Watch the nodes: list once, then follow the changes from the list's resourceVersion. To
// resume after a dropped connection, watch again from the last event's resourceVersion.
func ExampleResources_Watch() {
	server, token, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.New(server, token, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Orgs().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "acme"}}); err != nil {
		log.Fatal(err)
	}
	list, err := c.Nodes().List(ctx, client.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	w, err := c.Nodes().Watch(ctx, client.WatchOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()

	go func() {
		// Another program changes the nodes.
		_, _ = c.Nodes().Create(ctx, client.Object{Metadata: client.ObjectMeta{Name: "web01"}, Spec: json.RawMessage(`{"org":"acme"}`)})
		_, _ = c.Nodes().Patch(ctx, "web01", []byte(`{"metadata":{"labels":{"env":"prod"}}}`))
		_ = c.Nodes().Delete(ctx, "web01", client.DeleteOptions{})
	}()

	resume := list.ResourceVersion
	for seen := 0; seen < 3; {
		ev, err := w.Next()
		if err != nil {
			// A dropped stream (io.EOF, or an *Error of 503): watch again from resume.
			log.Fatalf("watch ended: %v; resume from %s", err, resume)
		}
		resume = ev.Object.Metadata.ResourceVersion
		if ev.Type == client.EventBookmark {
			continue // nothing changed; resume is newer
		}
		fmt.Printf("%s %s env=%q\n", ev.Type, ev.Object.Metadata.Name, ev.Object.Metadata.Labels["env"])
		seen++
	}
	// Output:
	// ADDED web01 env=""
	// MODIFIED web01 env="prod"
	// DELETED web01 env="prod"
}

// Lock a Terraform/OpenTofu workspace as Terraform's http backend does, see that a second
// holder is refused with the first one's lock, and unlock.
func ExampleClient_StateLock() {
	server, token, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c, err := client.New(server, token, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.ProjectPut(ctx, "network"); err != nil {
		log.Fatal(err)
	}
	held, err := c.StateLock(ctx, "network", "prod", client.LockInfo{ID: "7f3c", Who: "ci@runner-4", Operation: "OperationTypeApply"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked by", held.Who)

	_, err = c.StateLock(ctx, "network", "prod", client.LockInfo{ID: "91ab", Who: "alice@laptop", Operation: "OperationTypePlan"})
	if l, ok := client.LockOf(err); ok {
		fmt.Printf("%s/%s is held by %s (lock %s)\n", l.Project, l.Workspace, l.Holder.Who, l.Holder.ID)
	}

	if err := c.StateUnlock(ctx, "network", "prod", held.ID, false); err != nil {
		log.Fatal(err)
	}
	st, err := c.StateLockStatus(ctx, "network", "prod")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked:", st.Locked)
	// Output:
	// locked by ci@runner-4
	// network/prod is held by ci@runner-4 (lock 7f3c)
	// locked: false
}
