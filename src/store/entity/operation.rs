use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "operation")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub runtime_id: Uuid,
    pub operation_type: String,
    pub state: String,
    pub stage: String,
    pub message: String,
    pub last_error_message: Option<String>,
    pub last_error_reason: Option<String>,
    pub last_error_component: Option<String>,
    pub attempts: i32,
    pub owner: Option<String>,
    pub lease_expires_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub started_at: Option<DateTimeUtc>,
    pub updated_at: DateTimeUtc,
    pub finished_at: Option<DateTimeUtc>,
    pub claim_token: Option<Uuid>,
    pub claims: i32,
    pub progress_since_claim: bool,
    pub terraform_provider: Option<String>,
    pub plan_summary: Option<String>,
    pub target_config: Option<Json>,
    pub dry_run: bool,
    pub requested_by: Option<String>,
    pub cancel_requested_by: Option<String>,
    pub kubeconfig_sha256: Option<String>,
    pub retry_of: Option<Uuid>,
    pub saved_plan_sha256: Option<String>,
    pub approval_expires_at: Option<DateTimeUtc>,
    pub approved_by: Option<String>,
    pub approved_at: Option<DateTimeUtc>,
    pub forced: Option<String>,
    pub approval_policy: Option<String>,
    pub trace_parent: Option<String>,
    pub target_api_allowed_cidrs: Option<Json>,
    pub minors: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
