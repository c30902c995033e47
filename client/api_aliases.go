package client

import "github.com/stratahq/strata/api"

// The wire types live in package api, which the server and this client share; these
// aliases keep every program written against the client's names compiling.

type (
	KindRequest           = api.KindRequest
	KindAck               = api.KindAck
	KindImpact            = api.KindImpact
	KindFinding           = api.KindFinding
	KindReport            = api.KindReport
	KindRedundantAck      = api.KindRedundantAck
	KindResult            = api.KindResult
	KindInfo              = api.KindInfo
	KindRevision          = api.KindRevision
	PGPBlock              = api.PGPBlock
	PillarTarget          = api.PillarTarget
	Pillar                = api.Pillar
	PillarChange          = api.PillarChange
	PillarImportRequest   = api.PillarImportRequest
	PillarImportRow       = api.PillarImportRow
	PillarImportReport    = api.PillarImportReport
	SaltCredentials       = api.SaltCredentials
	PillarSettings        = api.PillarSettings
	PillarCategory        = api.PillarCategory
	PillarCategoryRequest = api.PillarCategoryRequest
	PillarExport          = api.PillarExport
	PillarSyncAction      = api.PillarSyncAction
	PillarSyncReport      = api.PillarSyncReport
	KeyStatus             = api.KeyStatus
	KeyRotation           = api.KeyRotation
	PillarRow             = api.PillarRow
	WriteResult           = api.WriteResult
	LockInfo              = api.LockInfo
	Project               = api.Project
	ProjectEncryption     = api.ProjectEncryption
	ProjectCredentials    = api.ProjectCredentials
	Workspace             = api.Workspace
	LockStatus            = api.LockStatus
	LockGap               = api.LockGap
	PGHolder              = api.PGHolder
	StateVersion          = api.StateVersion
	ProjectList           = api.ProjectList
	WorkspaceList         = api.WorkspaceList
	Object                = api.Object
	ObjectMeta            = api.ObjectMeta
	ObjectList            = api.ObjectList
	Problem               = api.Problem
	FieldError            = api.FieldError
	TokenCreateRequest    = api.TokenCreateRequest
	Token                 = api.Token
	TokenList             = api.TokenList
	AuditRecord           = api.AuditRecord
	AuditList             = api.AuditList
	Member                = api.Member
	MemberList            = api.MemberList
	ApplyResult           = api.ApplyResult
	ApplySummary          = api.ApplySummary
	Event                 = api.Event
)

const (
	PGPBegin      = api.PGPBegin
	PGPEnd        = api.PGPEnd
	EventAdded    = api.EventAdded
	EventModified = api.EventModified
	EventDeleted  = api.EventDeleted
	EventBookmark = api.EventBookmark
)

// FindPGPBlocks is api.FindPGPBlocks, kept here for programs written against the client.
var FindPGPBlocks = api.FindPGPBlocks

// NormalizeArmor is api.NormalizeArmor, kept here for programs written against the client.
var NormalizeArmor = api.NormalizeArmor
