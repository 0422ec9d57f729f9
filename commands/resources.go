package commands

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/proxyd/api"
)

var resourcesCommand = &cli.Command{
	Name:      "resources",
	Usage:     "list the resources and resource templates of every server, or of one",
	ArgsUsage: "[SERVER]",
	Description: `Lists resources as proxyd's connections see them: server, URI (or URI
template), name, MIME type and size. A resource clients do not see is
marked left out, with why: its server is not ready, or an earlier server
lists the same URI and serves it (-o json: "left_out"). Read one with
'mcpx read'.

Examples:
   mcpx resources
   mcpx resources docs -o json`,
	Flags:        []cli.Flag{outputFlag},
	BashComplete: completeServers,
	Action:       runResources,
}

func runResources(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageErr("resources takes at most one SERVER")
	}
	if _, err := format(c); err != nil {
		return err
	}
	out, err := newClient(c).Resources(c.Context, c.Args().First())
	if err != nil {
		return daemonErr(err)
	}
	return render(c, out, func(w io.Writer) error {
		if len(out) == 0 {
			emptyNote(w, "No resources (does the server offer any? see 'mcpx status').")
			return nil
		}
		t := newTable(w, "SERVER", "URI", "NAME", "MIME TYPE", "SIZE", "KIND") // KIND last: the columns before it stay where they were
		for _, r := range out {
			kind, uri, size := "resource", r.URI, "-"
			if uri == "" {
				kind, uri = "template", r.URITemplate // a column of its own: the URI cell stays a URI
			}
			if r.Size > 0 {
				size = byteSize(r.Size)
			}
			if r.LeftOut != "" {
				kind = "left out: " + t.Fit(r.LeftOut, 60, oneLine)
			}
			_ = t.Append([]string{r.Server, t.Fit(uri, 70, oneLine), t.Fit(firstNonEmpty(r.Title, r.Name), 40, oneLine), dash(r.MimeType), size, kind})
		}
		return t.Render()
	})
}

var readCommand = &cli.Command{
	Name:      "read",
	Usage:     "read a resource of SERVER through proxyd",
	ArgsUsage: "SERVER URI",
	Description: `Reads URI from SERVER (resources/read) through proxyd, recorded in the
activity log. Text is printed as it is; binary contents are described
(MIME type, size) and written to files with --save DIR.

Examples:
   mcpx read docs file:///README.md
   mcpx read everything test://static/resource/2 --save ./out`,
	Flags: []cli.Flag{
		outputFlag, saveFlag,
		&cli.DurationFlag{Name: "timeout", Action: positiveTimeout, Usage: "give up after `DURATION`", DefaultText: "the server's call timeout"},
	},
	BashComplete: completeServers,
	Action:       runRead,
}

func runRead(c *cli.Context) error {
	if c.NArg() != 2 {
		return usageErr("read needs SERVER and URI")
	}
	if _, err := format(c); err != nil {
		return err
	}
	params, _ := jsonObject(map[string]any{"uri": c.Args().Get(1)})
	res, err := sendRPC(c, api.RPCRequest{Server: c.Args().Get(0), Method: "resources/read", Params: params})
	if err != nil {
		return err
	}
	return rpcOutcome(c, res, func(w io.Writer) error {
		var r struct {
			Contents []content `json:"contents"`
		}
		if err := decodeResult(res, &r); err != nil {
			return err
		}
		p := &contentPrinter{w: w, save: c.String("save")}
		for _, x := range r.Contents {
			if err := p.contents(x); err != nil {
				return err
			}
		}
		return nil
	})
}
