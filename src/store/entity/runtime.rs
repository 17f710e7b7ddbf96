use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "runtime")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub name: String,
    pub description: Option<String>,
    pub labels: Json,
    pub topology: String,
    pub cloud: String,
    pub region: String,
    pub environment: String,
    pub credential_id: String,
    pub cluster_config: Json,
    pub last_operation_id: Option<Uuid>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
    pub preview: bool,
    pub hibernated: bool,
    pub state_bucket: Option<String>,
    pub tenant: Option<String>,
    pub deletion_protection: bool,
    pub approval_policy: String,
    pub api_allowed_cidrs: Option<Json>,
    pub managed_by: Option<String>,
    pub kubeconfig_expires_at: Option<DateTimeUtc>,
    pub certificates: Option<String>,
    pub certificates_due_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
