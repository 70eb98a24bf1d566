package api

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"

	"github.com/stratahq/strata/global/alerts"
	"github.com/stratahq/strata/internal/api"
	"github.com/stratahq/strata/internal/hostpolicy"
	"github.com/stratahq/strata/internal/secretbox"
	"github.com/stratahq/strata/internal/store"
)

// AlertRules are the rules that send events and conditions to webhook
// receivers (global/alerts delivers them). Rules are infrastructure:
// admin and infra tokens manage and read them. A receiver's secret is
// write only: no answer carries it, and etcd holds it sealed with the
// Secrets' keyring (alerts.StoredRule), never in plain text.
type AlertRules struct {
	c *alerts.Collections
	// ring seals receivers' secrets; nil refuses a rule with one.
	ring *secretbox.Keyring
	// receivers is where receivers may be: the master checks every
	// connection, and a URL that names an internal address outside it is
	// refused at once.
	receivers hostpolicy.Networks
}

// AlertRules returns the alert rules' service.
func (s *Server) AlertRules() *AlertRules {
	return &AlertRules{c: alerts.NewCollections(s.st.Store), ring: s.secrets.ring, receivers: s.alertReceivers}
}

// validate checks a rule as a client writes it, its receiver's host
// too: an address (or localhost) that the master would refuse to dial
// is refused now, with the rest of the rule's mistakes. A name is
// checked when it is dialled, with the address it resolves to then.
func (a *AlertRules) validate(r *api.AlertRule) error {
	err := r.Validate()
	fes := api.Fields(err)
	u, perr := url.Parse(r.Receiver.URL)
	if perr != nil || u.Hostname() == "" || slices.ContainsFunc(fes, func(fe *api.FieldError) bool { return fe.Field == "receiver.url" }) {
		return err // Validate says what is wrong with the URL
	}
	if a.receivers.CheckHost(u.Hostname()) == nil {
		return err
	}
	fes = append(fes, api.Fields(api.Invalid("receiver.url",
		"%s is loopback, private, link-local or otherwise internal: a receiver must be on a public address, or on a network the operator allows (alerts.receiverNetworks)",
		api.Quote(u.Hostname())))...)
	if len(fes) == 1 {
		return fes[0]
	}
	return api.FieldErrors(fes)
}

// Create adds a rule.
func (a *AlertRules) Create(ctx context.Context, r api.AlertRule) (api.AlertRule, error) {
	if _, err := authorize(ctx, seeEverything); err != nil {
		return api.AlertRule{}, err
	}
	r.Status, r.Receiver.HasSecret = nil, false
	if err := admit(ctx, alertRuleAdmission, onRequest, &alertRuleWrite{rules: a, r: &r}); err != nil {
		return api.AlertRule{}, err
	}
	t := now()
	r.CreatedAt, r.UpdatedAt, r.ResourceVersion = t, t, 0
	stored := alerts.StoredRule{AlertRule: r}
	if err := a.seal(&stored, r.Receiver.Secret); err != nil {
		return api.AlertRule{}, err
	}
	rev, err := a.c.Rules.Create(ctx, r.Name, &stored)
	if err != nil {
		return api.AlertRule{}, storeErr(err, "alert rule", r.Name)
	}
	return a.view(store.Item[alerts.StoredRule]{Name: r.Name, Value: &stored, ModRevision: rev}, nil), nil
}

// Get returns a rule with its delivery state.
func (a *AlertRules) Get(ctx context.Context, name string) (api.AlertRule, error) {
	if _, err := authorize(ctx, seeEverything); err != nil {
		return api.AlertRule{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.AlertRule{}, err
	}
	it, err := a.c.Rules.Get(ctx, name)
	if err != nil {
		return api.AlertRule{}, storeErr(err, "alert rule", name)
	}
	st, err := a.c.States.Get(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return api.AlertRule{}, storeErr(err, "alert state", name)
	}
	return a.view(it, st.Value), nil
}

// List returns every rule, by name, with its delivery state. Rules are
// few: no paging.
func (a *AlertRules) List(ctx context.Context) ([]api.AlertRule, error) {
	if _, err := authorize(ctx, seeEverything); err != nil {
		return nil, err
	}
	items, _, err := a.c.Rules.ListAll(ctx)
	if err != nil {
		return nil, storeErr(err, "alert rules", "")
	}
	states, _, err := a.c.States.ListAll(ctx)
	if err != nil {
		return nil, storeErr(err, "alert states", "")
	}
	byName := make(map[string]*alerts.RuleState, len(states))
	for _, st := range states {
		byName[st.Name] = st.Value
	}
	out := make([]api.AlertRule, len(items))
	for i, it := range items {
		out[i] = a.view(it, byName[it.Name])
	}
	return out, nil
}

// Update replaces a rule's spec. A receiver without a secret keeps the
// secret it had (a client writes back what it read, which has none);
// the secret changes only when a new one is sent. A resourceVersion
// makes the write conditional.
func (a *AlertRules) Update(ctx context.Context, r api.AlertRule) (api.AlertRule, error) {
	if _, err := authorize(ctx, seeEverything); err != nil {
		return api.AlertRule{}, err
	}
	r.Status, r.Receiver.HasSecret = nil, false
	if err := admit(ctx, alertRuleAdmission, onRequest, &alertRuleWrite{rules: a, r: &r}); err != nil {
		return api.AlertRule{}, err
	}
	var out api.AlertRule
	err := a.c.Rules.Store().RetryConflicts(ctx, "update alert rule "+r.Name, func() error {
		it, err := a.c.Rules.Get(ctx, r.Name)
		if err != nil {
			return err
		}
		if r.ResourceVersion != 0 && r.ResourceVersion != it.ModRevision {
			return fmt.Errorf("alert rule %q: resourceVersion %d is stale (it is now %d); read it again: %w",
				r.Name, r.ResourceVersion, it.ModRevision, api.ErrConflict)
		}
		next := alerts.StoredRule{AlertRule: r}
		next.CreatedAt, next.UpdatedAt, next.ResourceVersion = it.Value.CreatedAt, now(), 0
		secret := r.Receiver.Secret
		if secret == "" {
			// Kept as it is stored; one in plain text (written before
			// secrets were sealed) is sealed now if a keyring is there.
			next.SealedSecret, secret = it.Value.SealedSecret, it.Value.Receiver.Secret
			if a.ring == nil {
				next.Receiver.Secret, secret = secret, ""
			}
		}
		if err := a.seal(&next, secret); err != nil {
			return err
		}
		rev, err := a.c.Rules.Update(ctx, r.Name, &next, it.ModRevision)
		if err != nil {
			return err
		}
		out = a.view(store.Item[alerts.StoredRule]{Name: r.Name, Value: &next, ModRevision: rev}, nil)
		return nil
	})
	if err != nil {
		return api.AlertRule{}, storeErr(err, "alert rule", r.Name)
	}
	return out, nil
}

// Delete removes a rule; the master forgets its state and stops its
// deliveries. expect, when not 0, is the resourceVersion the client read.
func (a *AlertRules) Delete(ctx context.Context, name string, expect int64) (api.AlertRule, error) {
	if _, err := authorize(ctx, seeEverything); err != nil {
		return api.AlertRule{}, err
	}
	if err := api.ValidateName("name", name); err != nil {
		return api.AlertRule{}, err
	}
	it, err := a.c.Rules.Get(ctx, name)
	if err != nil {
		return api.AlertRule{}, storeErr(err, "alert rule", name)
	}
	if expect != 0 && expect != it.ModRevision {
		return api.AlertRule{}, fmt.Errorf("alert rule %q: resourceVersion %d is stale (it is now %d); read it again: %w",
			name, expect, it.ModRevision, api.ErrConflict)
	}
	if _, err := a.c.Rules.Delete(ctx, name, it.ModRevision); err != nil {
		return api.AlertRule{}, storeErr(err, "alert rule", name)
	}
	return a.view(it, nil), nil
}

// seal seals secret ("" for none) into r.
func (a *AlertRules) seal(r *alerts.StoredRule, secret string) error {
	if secret == "" {
		return nil
	}
	if a.ring == nil {
		return fmt.Errorf("receiver.secret: %w: %w", alerts.ErrNoKeyring, api.ErrUnavailable)
	}
	return alerts.SealSecret(a.ring, r, secret)
}

// view is a rule as answers show it: without its secret, with its
// delivery state when known.
func (a *AlertRules) view(it store.Item[alerts.StoredRule], st *alerts.RuleState) api.AlertRule {
	r := it.Value.AlertRule
	r.ResourceVersion = it.ModRevision
	r.Receiver.HasSecret = it.Value.HasSecret()
	r.Receiver.Secret = ""
	if st != nil {
		v := st.View()
		r.Status = &v
	}
	return r
}
