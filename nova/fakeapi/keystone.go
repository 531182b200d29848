package fakeapi

import (
	"net/http"
	"slices"
	"time"
)

// keystoneTime is keystone's timestamp format.
const keystoneTime = "2006-01-02T15:04:05.000000Z"

// identityVersions answers GET /identity: the version list gophercloud
// reads when auth_url names no version.
func (s *Server) identityVersions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{s.identityV3(r)}}})
}

// identityVersion answers GET /identity/v3.
func (s *Server) identityVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"version": s.identityV3(r)})
}

func (s *Server) identityV3(r *http.Request) map[string]any {
	return map[string]any{
		"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
		"links":       []any{map[string]any{"rel": "self", "href": s.baseURL(r) + identityPrefix + "/v3/"}},
		"media-types": []any{map[string]any{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}},
	}
}

// tokenRequest is the part of a v3 token request the fake reads.
type tokenRequest struct {
	Auth struct {
		Identity struct {
			Methods  []string `json:"methods"`
			Password *struct {
				User struct {
					ID       string `json:"id"`
					Name     string `json:"name"`
					Password string `json:"password"`
				} `json:"user"`
			} `json:"password"`
		} `json:"identity"`
		Scope *struct {
			Project *struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"project"`
		} `json:"scope"`
	} `json:"auth"`
}

// issueToken answers POST /identity/v3/auth/tokens: password
// authentication of Options.Username scoped to Options.ProjectName,
// 201 with the token in X-Subject-Token and the catalog in the body.
// Anything else is 401 (400 for a body that is not JSON).
func (s *Server) issueToken(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	if err := decodeBody(r, &req, false); err != nil {
		writeIdentityError(w, err)
		return
	}
	id := req.Auth.Identity
	if !slices.Contains(id.Methods, "password") || id.Password == nil {
		writeIdentityError(w, httpError(http.StatusUnauthorized, "the fake keystone supports password authentication only"))
		return
	}
	u := id.Password.User
	if (u.Name != s.opts.Username && u.ID != s.userID) || (s.opts.Password != "" && u.Password != s.opts.Password) {
		writeIdentityError(w, httpError(http.StatusUnauthorized, "The request you have made requires authentication."))
		return
	}
	sc := req.Auth.Scope
	if sc == nil || sc.Project == nil || (sc.Project.Name != s.opts.ProjectName && sc.Project.ID != s.projectID) {
		writeIdentityError(w, httpError(http.StatusUnauthorized, "the fake keystone issues tokens scoped to project %q only", s.opts.ProjectName))
		return
	}
	tok, exp := s.newToken()
	base := s.baseURL(r)
	domain := map[string]any{"id": "default", "name": "Default"}
	w.Header().Set("X-Subject-Token", tok)
	writeJSON(w, http.StatusCreated, map[string]any{"token": map[string]any{
		"methods":    []string{"password"},
		"expires_at": exp.UTC().Format(keystoneTime),
		"issued_at":  time.Now().UTC().Format(keystoneTime),
		"user":       map[string]any{"id": s.userID, "name": s.opts.Username, "domain": domain, "password_expires_at": nil},
		"project":    map[string]any{"id": s.projectID, "name": s.opts.ProjectName, "domain": domain},
		"roles":      []any{map[string]any{"id": nameID("role", "admin"), "name": "admin"}},
		"is_domain":  false,
		"catalog": []any{
			s.catalogEntry("identity", "keystone", base+identityPrefix),
			s.catalogEntry("compute", "nova", base+computePrefix),
			s.catalogEntry("placement", "placement", base+placementPrefix),
		},
	}})
}

// catalogEntry is one service of the catalog, with a public and an
// internal endpoint (the same URL) in Options.Region.
func (s *Server) catalogEntry(typ, name, url string) map[string]any {
	var eps []any
	for _, iface := range []string{"public", "internal"} {
		eps = append(eps, map[string]any{
			"id": nameID("endpoint", typ+"/"+iface), "interface": iface,
			"region": s.opts.Region, "region_id": s.opts.Region, "url": url,
		})
	}
	return map[string]any{"id": nameID("service", typ), "type": typ, "name": name, "endpoints": eps}
}

// authorized checks the request's X-Auth-Token.
func (s *Server) authorized(r *http.Request) bool { return s.validToken(r.Header.Get("X-Auth-Token")) }
