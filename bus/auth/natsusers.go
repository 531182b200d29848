package auth

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dvms-project/dvms/bus"
)

// ToolRole is a NATS role a tool's key may have (`dvms nats-config`
// --observer, --reader, --scheduler-api).
type ToolRole struct {
	Name  string // the role, as nats-config's flag names it
	Perms func(region, pub string) bus.Permissions
}

// ToolRoles are the NATS roles of the tools' keys.
var ToolRoles = []ToolRole{
	{"observer", bus.ObserverPermissions},
	{"reader", bus.ReaderPermissions},
	{"scheduler-api", func(region, _ string) bus.Permissions { return bus.SchedulerAPIPermissions(region) }},
}

// NATSServerConfig lists one NATS user per agent key of keysDir (the
// region's HOST.pub files) and per tool public key file, by role
// (ToolRoles' names), each with its subject permissions.
func NATSServerConfig(keysDir, region string, tools map[string][]string) (bus.ServerConfig, error) {
	ents, err := os.ReadDir(keysDir)
	if err != nil {
		return bus.ServerConfig{}, fmt.Errorf("keys directory: %w", err)
	}
	var sc bus.ServerConfig
	pubs := map[string]string{}
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), PubExt) {
			b, err := os.ReadFile(filepath.Join(keysDir, e.Name()))
			if err != nil {
				return sc, err
			}
			pubs[strings.TrimSuffix(e.Name(), PubExt)] = string(b)
		}
	}
	ring, err := NewKeyring(pubs) // the same checks the agents make
	if err != nil {
		return sc, fmt.Errorf("keys directory %s: %w", keysDir, err)
	}
	if ring.Len() == 0 {
		return sc, fmt.Errorf("keys directory %s: no *%s file", keysDir, PubExt)
	}
	hosts := make([]string, 0, len(pubs))
	for h := range pubs {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	seen := map[string]string{}
	for _, h := range hosts {
		pub := strings.TrimSpace(pubs[h])
		seen[pub] = "agent " + h
		sc.Users = append(sc.Users, bus.User{Name: "agent " + h, Nkey: pub, Perms: bus.AgentPermissions(region, h)})
	}
	for _, role := range ToolRoles {
		for _, f := range tools[role.Name] {
			b, err := os.ReadFile(f)
			if err != nil {
				return sc, fmt.Errorf("%s key: %w", role.Name, err)
			}
			name := strings.TrimSuffix(filepath.Base(f), PubExt)
			if _, err := NewKeyring(map[string]string{name: string(b)}); err != nil {
				return sc, fmt.Errorf("%s key %s: %w", role.Name, f, err)
			}
			if _, clash := pubs[name]; clash || filepath.Clean(filepath.Dir(f)) == filepath.Clean(keysDir) {
				return sc, fmt.Errorf("%s key %s: keep tools' keys outside the keys directory (the agents would take it for a host)", role.Name, f)
			}
			pub := strings.TrimSpace(string(b))
			if other, dup := seen[pub]; dup {
				return sc, fmt.Errorf("%s key %s: the same key is already %s (NATS takes one user per key)", role.Name, f, other)
			}
			seen[pub] = role.Name + " " + f
			sc.Users = append(sc.Users, bus.User{Name: role.Name + " " + name, Nkey: pub, Perms: role.Perms(region, pub)})
		}
	}
	return sc, nil
}
