package openstack

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/dvms-project/dvms/nova"
)

var (
	_ nova.ColdMigrator = (*Client)(nil)
	_ nova.ActionLister = (*Client)(nil)
)

// Migrate implements nova.ColdMigrator: {"migrate": {"host": dest}}
// (2.56+; {"migrate": null} lets Nova's scheduler choose). One request.
func (c *Client) Migrate(ctx context.Context, serverID, dest string) (nova.Receipt, error) {
	var body any
	if dest != "" {
		body = map[string]any{"host": dest}
	}
	rc, err := c.action(ctx, serverID, map[string]any{"migrate": body})
	if err != nil {
		to := dest
		if to == "" {
			to = "a host Nova picks"
		}
		return rc, fmt.Errorf("cold-migrate %s to %s: %w", serverID, to, err)
	}
	return rc, nil
}

// ConfirmResize implements nova.ColdMigrator: {"confirmResize": null}
// (Nova answers 204, not 202).
func (c *Client) ConfirmResize(ctx context.Context, serverID string) (nova.Receipt, error) {
	h, err := c.do(ctx, request{
		sc: c.compute, method: http.MethodPost,
		url:  c.compute.ServiceURL("servers", url.PathEscape(serverID), "action"),
		body: map[string]any{"confirmResize": nil}, ok: []int{http.StatusNoContent, http.StatusAccepted},
	})
	rc := receipt(ctx, h)
	if err != nil {
		return rc, fmt.Errorf("confirm resize of %s: %w", serverID, err)
	}
	return rc, nil
}

// RevertResize implements nova.ColdMigrator: {"revertResize": null}.
func (c *Client) RevertResize(ctx context.Context, serverID string) (nova.Receipt, error) {
	rc, err := c.action(ctx, serverID, map[string]any{"revertResize": nil})
	if err != nil {
		return rc, fmt.Errorf("revert resize of %s: %w", serverID, err)
	}
	return rc, nil
}

// ServerActions implements nova.ActionLister: GET
// /servers/{id}/os-instance-actions, newest first as Nova lists them.
func (c *Client) ServerActions(ctx context.Context, serverID string) ([]nova.ServerAction, error) {
	var out struct {
		Actions []struct {
			Action    string  `json:"action"`
			RequestID string  `json:"request_id"`
			Message   *string `json:"message"`
			StartTime string  `json:"start_time"`
		} `json:"instanceActions"`
	}
	u := c.compute.ServiceURL("servers", url.PathEscape(serverID), "os-instance-actions")
	if _, err := c.get(ctx, c.compute, u, &out); err != nil {
		return nil, fmt.Errorf("instance actions of %s: %w", serverID, err)
	}
	as := make([]nova.ServerAction, 0, len(out.Actions))
	for _, a := range out.Actions {
		sa := nova.ServerAction{Action: a.Action, RequestID: a.RequestID, Start: parseTime(a.StartTime)}
		if a.Message != nil {
			sa.Message = *a.Message
		}
		as = append(as, sa)
	}
	return as, nil
}
