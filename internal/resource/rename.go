package resource

import (
	"context"
	"errors"

	"github.com/stratahq/strata/api"
	"github.com/stratahq/strata/internal/auth"
	"github.com/stratahq/strata/internal/db"
	"github.com/stratahq/strata/internal/fault"
)

// renamingKey marks a context whose writes are the two halves of a rename: they are audited
// once, as the rename, not as a deletion and a creation.
type renamingKey struct{}

func renaming(ctx context.Context) bool { return ctx.Value(renamingKey{}) != nil }

// OnRename registers f to run in the renaming transaction after an object of kind was
// renamed from old to new (id is its row id): for what other packages key by name, such as
// the pillar history (internal/pillar). Call it before serving.
func (s *Service) OnRename(f func(ctx context.Context, tx *db.Tx, kind string, id int64, old, new string) error) {
	s.onRename = append(s.onRename, f)
}

// Rename gives the object ref names a new name, in one transaction: the row keeps its id, so
// its labels, annotations, static memberships and pillars follow it, and the OnRename
// functions re-key what is kept by name. Name-keyed consumers see it as it looks to them: a
// watch gets DELETED of the old name and ADDED of the new one. The new name must be free
// (409 naming it); the kind must be renamable (Kind.Renamable). The writer needs the kind's
// write scope on the new name (the route checks the old one) and the scopes of the
// references the object holds (checkHeld: orgs:attach on a node's org), so a rename can
// neither take a name the writer may not use nor move another org's object under one it
// may. One audit record (object.rename) names both.
func (s *Service) Rename(ctx context.Context, ref Ref, newName string) (api.Object, error) {
	k, err := s.kindOf(ctx, ref)
	if err != nil {
		return api.Object{}, err
	}
	if !k.Renamable {
		return api.Object{}, fault.New(fault.KindUnprocessable, "objects of kind %s cannot be renamed: create the new one and delete the old", k.Name)
	}
	// The new name is a name the writer takes: it needs the write scope on it as on the old
	// one (the route checked the old one), before anything is looked up.
	if az := authorizerFrom(ctx); az != nil {
		if err := az.Check(k.Family, "write", familyName(k, ref.Org, newName)); err != nil {
			return api.Object{}, err
		}
	}
	validate := ValidateName
	if k.ValidateName != nil {
		validate = k.ValidateName
	}
	if err := validate(newName); err != nil {
		return api.Object{}, fieldAt("/name", err)
	}
	to := Ref{Kind: ref.Kind, Org: ref.Org, Name: newName}
	if newName == ref.Name {
		return s.Get(ctx, ref)
	}
	var out api.Object
	defer s.wrote(ref, to)
	rctx := context.WithValue(ctx, renamingKey{}, true)
	err = s.writeTx(ctx, func(tx *db.Tx) error {
		id, cur, err := lockForWrite(rctx, tx, nil, ref, "")
		if err != nil {
			return err
		}
		// An identity move: the references the object holds (a node's org) need their
		// scope, checked on the locked row so a concurrent move cannot slip past it.
		if err := checkHeld(rctx, k, cur, "renaming"); err != nil {
			return err
		}
		if _, err := tx.Exec(rctx, q.Get("ResourceRename"), id, newName); errors.Is(err, db.ErrConflict) {
			return &fault.Error{Kind: fault.KindConflict, Detail: k.Name + " " + newName + " already exists; rename to a free name",
				Fields: []fault.FieldError{{Field: "/name", Message: "taken by another " + k.Name}}}
		} else if err != nil {
			return err
		}
		if err := stampDeleted(rctx, tx, cur); err != nil {
			return err
		}
		obj := cur
		obj.Metadata.Name = newName
		if out, err = writeAndStamp(rctx, tx, id, "ADDED", obj, &cur, ""); err != nil {
			return err
		}
		for _, f := range s.onRename {
			if err := f(rctx, tx, k.Name, id, ref.Name, newName); err != nil {
				return err
			}
		}
		who := writer(ctx)
		return auth.RecordAudit(ctx, tx, auth.AuditEntry{Actor: who.Actor, Action: "object.rename", Target: objectTarget(cur),
			Detail: map[string]string{"to": objectTarget(out)}})
	})
	if err != nil {
		return api.Object{}, err
	}
	s.presentObject(ctx, s.db, &out)
	return out, nil
}

// fieldAt moves a name validation error to the request body's field.
func fieldAt(field string, err error) error {
	var fe *fault.Error
	if errors.As(err, &fe) {
		out := *fe
		out.Fields = []fault.FieldError{{Field: field, Message: fe.Detail}}
		return &out
	}
	return err
}
