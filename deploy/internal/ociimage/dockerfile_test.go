package ociimage

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// stage is one FROM … AS name of a Dockerfile and its instructions.
type stage struct {
	from, name string
	instrs     [][2]string // instruction (upper case), arguments
}

// parseDockerfile reads the stages of a Dockerfile: comments dropped, continuation lines
// joined.
func parseDockerfile(t *testing.T, path string) map[string]*stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]*stage{}
	var cur *stage
	var line strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && line.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(l, "\\"); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(l)
		full := strings.TrimSpace(line.String())
		line.Reset()
		if full == "" {
			continue
		}
		instr, args, _ := strings.Cut(full, " ")
		instr = strings.ToUpper(instr)
		args = strings.TrimSpace(args)
		if instr == "FROM" {
			f := strings.Fields(args)
			cur = &stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				cur.name = f[2]
			}
			stages[cur.name] = cur
			continue
		}
		if cur != nil {
			cur.instrs = append(cur.instrs, [2]string{instr, args})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func (s *stage) all(instr string) []string {
	var out []string
	for _, i := range s.instrs {
		if i[0] == instr {
			out = append(out, i[1])
		}
	}
	return out
}

// pairs parses LABEL and ENV arguments: key=value or key="value", space-separated.
func pairs(t *testing.T, args string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for args = strings.TrimSpace(args); args != ""; args = strings.TrimSpace(args) {
		k, rest, ok := strings.Cut(args, "=")
		if !ok {
			t.Fatalf("no key=value in %q", args)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				t.Fatalf("unterminated quote in %q", rest)
			}
			v, args = rest[1:1+end], rest[2+end:]
		} else {
			v, args, _ = strings.Cut(rest, " ")
		}
		out[k] = v
	}
	return out
}

// TestDockerfile: the Dockerfile's targets are the images of Specs — the same binaries
// built the same way, the same files, user, ports, entrypoint, arguments and labels — so
// that `docker build` and `make images` give the same images.
func TestDockerfile(t *testing.T) {
	mod, err := RootModuleDir(".")
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, filepath.Join(mod, "Dockerfile"))
	build := stages["build"]
	if build == nil {
		t.Fatal("no build stage")
	}
	run := strings.Join(build.all("RUN"), "\n")
	stamp := Build{Version: "${VERSION}", Commit: "${COMMIT}"}
	if want := `go build -trimpath -tags timetzdata -ldflags "` + stamp.LDFlags() + `"`; !strings.Contains(run, want) {
		t.Errorf("the build stage does not run %s", want)
	}
	if !slices.Contains(build.all("ENV"), "CGO_ENABLED=0") {
		t.Error("the build stage does not set CGO_ENABLED=0")
	}
	for _, f := range files {
		if f.body != "" && !strings.Contains(run, "'"+strings.ReplaceAll(f.body, "\n", `\n`)+"'") {
			t.Errorf("the build stage does not write %s as %q", f.name, f.body)
		}
	}
	var stageNames []string
	for n := range stages {
		if n != "build" {
			stageNames = append(stageNames, n)
		}
	}
	var specNames []string
	for _, s := range Specs {
		specNames = append(specNames, s.Name)
	}
	if slices.Sort(stageNames); !slices.Equal(stageNames, slices.Sorted(slices.Values(specNames))) {
		t.Errorf("image stages %v, want %v", stageNames, specNames)
	}
	for _, s := range Specs {
		t.Run(s.Name, func(t *testing.T) {
			if f := strings.FieldsFunc(run, func(r rune) bool { return r == ' ' || r == ';' }); !slices.Contains(f, s.Name+"="+s.Package) {
				t.Errorf("the build stage does not build %s from %s", s.Name, s.Package)
			}
			st := stages[s.Name]
			if st == nil {
				t.Fatalf("no stage %s", s.Name)
			}
			if st.from != "scratch" {
				t.Errorf("FROM %s, want scratch", st.from)
			}
			if got := st.all("COPY"); !slices.Equal(got, []string{"--from=build /rootfs/" + s.Name + "/ /"}) {
				t.Errorf("COPY %q: want the image's root file system, in one layer", got)
			}
			if got := st.all("USER"); !slices.Equal(got, []string{User()}) {
				t.Errorf("USER %q, want %s", got, User())
			}
			if got := st.all("WORKDIR"); !slices.Equal(got, []string{"/"}) {
				t.Errorf("WORKDIR %q", got)
			}
			envs := st.all("ENV")
			if len(envs) != 1 || !reflect.DeepEqual(pairs(t, envs[0]), map[string]string{"PATH": BinDir, "HOME": "/home/nonroot"}) {
				t.Errorf("ENV %q", envs)
			}
			var ports []string
			for _, p := range s.Ports {
				ports = append(ports, strconv.Itoa(p))
			}
			var exposed []string
			for _, e := range st.all("EXPOSE") {
				exposed = append(exposed, strings.Fields(e)...)
			}
			if !slices.Equal(exposed, ports) {
				t.Errorf("EXPOSE %v, want %v", exposed, ports)
			}
			labels := map[string]string{}
			for _, l := range st.all("LABEL") {
				for k, v := range pairs(t, l) {
					v = strings.NewReplacer("${VERSION}", testBuild.Version, "${COMMIT}", testBuild.Commit,
						"${CREATED}", testBuild.Created.Format("2006-01-02T15:04:05Z")).Replace(v)
					labels[k] = v
				}
			}
			if want := s.Labels(testBuild); !reflect.DeepEqual(labels, want) {
				t.Errorf("LABEL %v\nwant  %v", labels, want)
			}
			for instr, want := range map[string][]string{"ENTRYPOINT": s.Entrypoint(), "CMD": s.Cmd} {
				got := st.all(instr)
				var args []string
				if len(got) != 1 || json.Unmarshal([]byte(got[0]), &args) != nil || !slices.Equal(args, want) {
					t.Errorf("%s %q, want %q (exec form)", instr, got, want)
				}
			}
		})
	}
}
