import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_TYPE_UNSPECIFIED: _ClassVar[MemoryType]
    MEMORY_TYPE_USER: _ClassVar[MemoryType]
    MEMORY_TYPE_FEEDBACK: _ClassVar[MemoryType]
    MEMORY_TYPE_PROJECT: _ClassVar[MemoryType]
    MEMORY_TYPE_REFERENCE: _ClassVar[MemoryType]

class MemoryScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_SCOPE_UNSPECIFIED: _ClassVar[MemoryScope]
    MEMORY_SCOPE_SESSION: _ClassVar[MemoryScope]
    MEMORY_SCOPE_PROJECT: _ClassVar[MemoryScope]
    MEMORY_SCOPE_GLOBAL: _ClassVar[MemoryScope]

class RecordStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECORD_STATUS_UNSPECIFIED: _ClassVar[RecordStatus]
    RECORD_STATUS_CANONICAL: _ClassVar[RecordStatus]
    RECORD_STATUS_PENDING: _ClassVar[RecordStatus]

class MemoryErrorCategory(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_ERROR_CATEGORY_UNSPECIFIED: _ClassVar[MemoryErrorCategory]
    MEMORY_ERROR_CATEGORY_NOT_FOUND: _ClassVar[MemoryErrorCategory]
    MEMORY_ERROR_CATEGORY_INVALID_TYPE: _ClassVar[MemoryErrorCategory]
    MEMORY_ERROR_CATEGORY_RATIFICATION_UNSUPPORTED: _ClassVar[MemoryErrorCategory]
    MEMORY_ERROR_CATEGORY_BUDGET_EXCEEDED: _ClassVar[MemoryErrorCategory]
    MEMORY_ERROR_CATEGORY_SOURCE_UNAVAILABLE: _ClassVar[MemoryErrorCategory]
    MEMORY_ERROR_CATEGORY_UNKNOWN: _ClassVar[MemoryErrorCategory]
    MEMORY_ERROR_CATEGORY_INVALID_SCOPE: _ClassVar[MemoryErrorCategory]

class Category(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATEGORY_UNSPECIFIED: _ClassVar[Category]
    CATEGORY_MODEL: _ClassVar[Category]
    CATEGORY_TOOL: _ClassVar[Category]
    CATEGORY_CONTEXT: _ClassVar[Category]
    CATEGORY_MEMORY: _ClassVar[Category]
    CATEGORY_FRONTEND: _ClassVar[Category]
    CATEGORY_WIDGET: _ClassVar[Category]
    CATEGORY_SLASHCOMMAND: _ClassVar[Category]

class HookPoint(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOOK_POINT_UNSPECIFIED: _ClassVar[HookPoint]
    HOOK_POINT_SESSION_START: _ClassVar[HookPoint]
    HOOK_POINT_PRE_MODEL_CALL: _ClassVar[HookPoint]
    HOOK_POINT_POST_MODEL_RESPONSE: _ClassVar[HookPoint]
    HOOK_POINT_PRE_TOOL_CALL: _ClassVar[HookPoint]
    HOOK_POINT_PLAN_READY: _ClassVar[HookPoint]
    HOOK_POINT_POST_TOOL_CALL: _ClassVar[HookPoint]
    HOOK_POINT_POST_APPLY: _ClassVar[HookPoint]
    HOOK_POINT_SESSION_END: _ClassVar[HookPoint]

class AttrType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTR_TYPE_UNSPECIFIED: _ClassVar[AttrType]
    ATTR_TYPE_STRING: _ClassVar[AttrType]
    ATTR_TYPE_NUMBER: _ClassVar[AttrType]
    ATTR_TYPE_BOOL: _ClassVar[AttrType]
    ATTR_TYPE_LIST_STRING: _ClassVar[AttrType]
    ATTR_TYPE_LIST_NUMBER: _ClassVar[AttrType]
    ATTR_TYPE_MAP_STRING: _ClassVar[AttrType]
    ATTR_TYPE_OBJECT: _ClassVar[AttrType]
MEMORY_TYPE_UNSPECIFIED: MemoryType
MEMORY_TYPE_USER: MemoryType
MEMORY_TYPE_FEEDBACK: MemoryType
MEMORY_TYPE_PROJECT: MemoryType
MEMORY_TYPE_REFERENCE: MemoryType
MEMORY_SCOPE_UNSPECIFIED: MemoryScope
MEMORY_SCOPE_SESSION: MemoryScope
MEMORY_SCOPE_PROJECT: MemoryScope
MEMORY_SCOPE_GLOBAL: MemoryScope
RECORD_STATUS_UNSPECIFIED: RecordStatus
RECORD_STATUS_CANONICAL: RecordStatus
RECORD_STATUS_PENDING: RecordStatus
MEMORY_ERROR_CATEGORY_UNSPECIFIED: MemoryErrorCategory
MEMORY_ERROR_CATEGORY_NOT_FOUND: MemoryErrorCategory
MEMORY_ERROR_CATEGORY_INVALID_TYPE: MemoryErrorCategory
MEMORY_ERROR_CATEGORY_RATIFICATION_UNSUPPORTED: MemoryErrorCategory
MEMORY_ERROR_CATEGORY_BUDGET_EXCEEDED: MemoryErrorCategory
MEMORY_ERROR_CATEGORY_SOURCE_UNAVAILABLE: MemoryErrorCategory
MEMORY_ERROR_CATEGORY_UNKNOWN: MemoryErrorCategory
MEMORY_ERROR_CATEGORY_INVALID_SCOPE: MemoryErrorCategory
CATEGORY_UNSPECIFIED: Category
CATEGORY_MODEL: Category
CATEGORY_TOOL: Category
CATEGORY_CONTEXT: Category
CATEGORY_MEMORY: Category
CATEGORY_FRONTEND: Category
CATEGORY_WIDGET: Category
CATEGORY_SLASHCOMMAND: Category
HOOK_POINT_UNSPECIFIED: HookPoint
HOOK_POINT_SESSION_START: HookPoint
HOOK_POINT_PRE_MODEL_CALL: HookPoint
HOOK_POINT_POST_MODEL_RESPONSE: HookPoint
HOOK_POINT_PRE_TOOL_CALL: HookPoint
HOOK_POINT_PLAN_READY: HookPoint
HOOK_POINT_POST_TOOL_CALL: HookPoint
HOOK_POINT_POST_APPLY: HookPoint
HOOK_POINT_SESSION_END: HookPoint
ATTR_TYPE_UNSPECIFIED: AttrType
ATTR_TYPE_STRING: AttrType
ATTR_TYPE_NUMBER: AttrType
ATTR_TYPE_BOOL: AttrType
ATTR_TYPE_LIST_STRING: AttrType
ATTR_TYPE_LIST_NUMBER: AttrType
ATTR_TYPE_MAP_STRING: AttrType
ATTR_TYPE_OBJECT: AttrType

class PromptExpansionSpec(_message.Message):
    __slots__ = ("name", "description", "template")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    template: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., template: _Optional[str] = ...) -> None: ...

class ConfigAttribute(_message.Message):
    __slots__ = ("name", "type", "required", "sensitive", "description", "object_attributes", "default_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    SENSITIVE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: AttrType
    required: bool
    sensitive: bool
    description: str
    object_attributes: _containers.RepeatedCompositeFieldContainer[ConfigAttribute]
    default_json: str
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[AttrType, str]] = ..., required: _Optional[bool] = ..., sensitive: _Optional[bool] = ..., description: _Optional[str] = ..., object_attributes: _Optional[_Iterable[_Union[ConfigAttribute, _Mapping]]] = ..., default_json: _Optional[str] = ...) -> None: ...

class ConfigSchema(_message.Message):
    __slots__ = ("attributes",)
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    attributes: _containers.RepeatedCompositeFieldContainer[ConfigAttribute]
    def __init__(self, attributes: _Optional[_Iterable[_Union[ConfigAttribute, _Mapping]]] = ...) -> None: ...

class MemoryCapabilities(_message.Message):
    __slots__ = ("default_token_budget", "supported_types", "supported_scopes", "ratification_supported", "slash_commands", "config_schema", "supported_hook_points")
    DEFAULT_TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_TYPES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_SCOPES_FIELD_NUMBER: _ClassVar[int]
    RATIFICATION_SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    SLASH_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_HOOK_POINTS_FIELD_NUMBER: _ClassVar[int]
    default_token_budget: int
    supported_types: _containers.RepeatedScalarFieldContainer[MemoryType]
    supported_scopes: _containers.RepeatedScalarFieldContainer[MemoryScope]
    ratification_supported: bool
    slash_commands: _containers.RepeatedCompositeFieldContainer[PromptExpansionSpec]
    config_schema: ConfigSchema
    supported_hook_points: _containers.RepeatedScalarFieldContainer[HookPoint]
    def __init__(self, default_token_budget: _Optional[int] = ..., supported_types: _Optional[_Iterable[_Union[MemoryType, str]]] = ..., supported_scopes: _Optional[_Iterable[_Union[MemoryScope, str]]] = ..., ratification_supported: _Optional[bool] = ..., slash_commands: _Optional[_Iterable[_Union[PromptExpansionSpec, _Mapping]]] = ..., config_schema: _Optional[_Union[ConfigSchema, _Mapping]] = ..., supported_hook_points: _Optional[_Iterable[_Union[HookPoint, str]]] = ...) -> None: ...

class TextBlock(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ContentBlock(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: TextBlock
    def __init__(self, text: _Optional[_Union[TextBlock, _Mapping]] = ...) -> None: ...

class ModelTarget(_message.Message):
    __slots__ = ("id", "context_window", "effective_ceiling")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_CEILING_FIELD_NUMBER: _ClassVar[int]
    id: str
    context_window: int
    effective_ceiling: int
    def __init__(self, id: _Optional[str] = ..., context_window: _Optional[int] = ..., effective_ceiling: _Optional[int] = ...) -> None: ...

class ProducerRef(_message.Message):
    __slots__ = ("name", "version", "source", "category", "protocol_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    source: str
    category: Category
    protocol_version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., source: _Optional[str] = ..., category: _Optional[_Union[Category, str]] = ..., protocol_version: _Optional[int] = ...) -> None: ...

class Provenance(_message.Message):
    __slots__ = ("source_session_id", "source_turn_id", "recorded_by")
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TURN_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDED_BY_FIELD_NUMBER: _ClassVar[int]
    source_session_id: str
    source_turn_id: str
    recorded_by: str
    def __init__(self, source_session_id: _Optional[str] = ..., source_turn_id: _Optional[str] = ..., recorded_by: _Optional[str] = ...) -> None: ...

class MemoryRecord(_message.Message):
    __slots__ = ("id", "type", "scope", "title", "content", "tokens", "status", "links", "created_at", "updated_at", "provenance", "relevance_score")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: MemoryType
    scope: MemoryScope
    title: str
    content: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    tokens: int
    status: RecordStatus
    links: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    provenance: Provenance
    relevance_score: float
    def __init__(self, id: _Optional[str] = ..., type: _Optional[_Union[MemoryType, str]] = ..., scope: _Optional[_Union[MemoryScope, str]] = ..., title: _Optional[str] = ..., content: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ..., tokens: _Optional[int] = ..., status: _Optional[_Union[RecordStatus, str]] = ..., links: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., provenance: _Optional[_Union[Provenance, _Mapping]] = ..., relevance_score: _Optional[float] = ...) -> None: ...

class MemoryError(_message.Message):
    __slots__ = ("category", "message", "retryable")
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    category: MemoryErrorCategory
    message: str
    retryable: bool
    def __init__(self, category: _Optional[_Union[MemoryErrorCategory, str]] = ..., message: _Optional[str] = ..., retryable: _Optional[bool] = ...) -> None: ...

class GetCapabilitiesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCapabilitiesResponse(_message.Message):
    __slots__ = ("capabilities",)
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    capabilities: MemoryCapabilities
    def __init__(self, capabilities: _Optional[_Union[MemoryCapabilities, _Mapping]] = ...) -> None: ...

class ConfigureRequest(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: _struct_pb2.Struct
    def __init__(self, config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ConfigureResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecallRequest(_message.Message):
    __slots__ = ("session_id", "turn_id", "token_budget", "model_target", "files_touched", "working_directory", "type_filter", "scope_filter", "include_pending")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    MODEL_TARGET_FIELD_NUMBER: _ClassVar[int]
    FILES_TOUCHED_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    TYPE_FILTER_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FILTER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PENDING_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    turn_id: str
    token_budget: int
    model_target: ModelTarget
    files_touched: _containers.RepeatedScalarFieldContainer[str]
    working_directory: str
    type_filter: _containers.RepeatedScalarFieldContainer[MemoryType]
    scope_filter: _containers.RepeatedScalarFieldContainer[MemoryScope]
    include_pending: bool
    def __init__(self, session_id: _Optional[str] = ..., turn_id: _Optional[str] = ..., token_budget: _Optional[int] = ..., model_target: _Optional[_Union[ModelTarget, _Mapping]] = ..., files_touched: _Optional[_Iterable[str]] = ..., working_directory: _Optional[str] = ..., type_filter: _Optional[_Iterable[_Union[MemoryType, str]]] = ..., scope_filter: _Optional[_Iterable[_Union[MemoryScope, str]]] = ..., include_pending: _Optional[bool] = ...) -> None: ...

class RecallResponse(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[MemoryRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[MemoryRecord, _Mapping]]] = ...) -> None: ...

class RecordRequest(_message.Message):
    __slots__ = ("type", "scope", "id", "title", "content")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    type: MemoryType
    scope: MemoryScope
    id: str
    title: str
    content: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    def __init__(self, type: _Optional[_Union[MemoryType, str]] = ..., scope: _Optional[_Union[MemoryScope, str]] = ..., id: _Optional[str] = ..., title: _Optional[str] = ..., content: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ...) -> None: ...

class RecordResult(_message.Message):
    __slots__ = ("id", "status")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: RecordStatus
    def __init__(self, id: _Optional[str] = ..., status: _Optional[_Union[RecordStatus, str]] = ...) -> None: ...

class RecordResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: RecordResult
    def __init__(self, result: _Optional[_Union[RecordResult, _Mapping]] = ...) -> None: ...

class UpdateRecordRequest(_message.Message):
    __slots__ = ("id", "title", "content")
    ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    title: str
    content: _containers.RepeatedCompositeFieldContainer[ContentBlock]
    def __init__(self, id: _Optional[str] = ..., title: _Optional[str] = ..., content: _Optional[_Iterable[_Union[ContentBlock, _Mapping]]] = ...) -> None: ...

class UpdateRecordResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: RecordResult
    def __init__(self, result: _Optional[_Union[RecordResult, _Mapping]] = ...) -> None: ...

class DeleteRecordRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteResult(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class DeleteRecordResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: DeleteResult
    def __init__(self, result: _Optional[_Union[DeleteResult, _Mapping]] = ...) -> None: ...

class ApproveRecordRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ApproveRecordResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: RecordResult
    def __init__(self, result: _Optional[_Union[RecordResult, _Mapping]] = ...) -> None: ...

class RejectRecordRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RejectRecordResponse(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: DeleteResult
    def __init__(self, result: _Optional[_Union[DeleteResult, _Mapping]] = ...) -> None: ...

class ListRecordsRequest(_message.Message):
    __slots__ = ("type_filter", "scope_filter", "status_filter", "page_size", "page_token")
    TYPE_FILTER_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FILTER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    type_filter: _containers.RepeatedScalarFieldContainer[MemoryType]
    scope_filter: _containers.RepeatedScalarFieldContainer[MemoryScope]
    status_filter: RecordStatus
    page_size: int
    page_token: str
    def __init__(self, type_filter: _Optional[_Iterable[_Union[MemoryType, str]]] = ..., scope_filter: _Optional[_Iterable[_Union[MemoryScope, str]]] = ..., status_filter: _Optional[_Union[RecordStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRecordsResponse(_message.Message):
    __slots__ = ("records", "next_page_token")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[MemoryRecord]
    next_page_token: str
    def __init__(self, records: _Optional[_Iterable[_Union[MemoryRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetRecordRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetRecordResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: MemoryRecord
    def __init__(self, record: _Optional[_Union[MemoryRecord, _Mapping]] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("producer",)
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    producer: ProducerRef
    def __init__(self, producer: _Optional[_Union[ProducerRef, _Mapping]] = ...) -> None: ...
