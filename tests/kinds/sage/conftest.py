"""Fixtures for the sage tests: the real RA3 data (skipped when absent) and a tiny synthetic mod + SDK."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from deskbridge.kinds.sage.manifest import build_manifest
from deskbridge.kinds.sage.model import SageIndex
from deskbridge.kinds.sage.service import SageService

SAGE_DATA = Path(__file__).resolve().parents[3] / "../shared/data/sage"


@dataclass
class RealData:
    root: Path
    sdk: Path
    mod: Path


def real_data() -> RealData:
    root = SAGE_DATA.resolve()
    if not (root / "ra3-sdk").is_dir() or not (root / "mods" / "RA3Afterdash").is_dir():
        pytest.skip(f"SAGE test data not found at {root} (see shared/data/sage/README.md)")
    return RealData(root=root, sdk=root / "ra3-sdk", mod=root / "mods" / "RA3Afterdash")


@pytest.fixture(scope="session")
def sage_data() -> RealData:
    return real_data()


@pytest.fixture(scope="session")
def real_service(sage_data: RealData, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SageService]:
    """RA3Afterdash indexed against EA's RA3 XML once per test session (no disk cache)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("DESKBRIDGE_HOME", str(tmp_path_factory.mktemp("sage-real-home")))
    service = SageService(sage_data.mod, sage_data.sdk, use_cache=False)
    service.open_sync()
    yield service
    mp.undo()


@pytest.fixture(scope="session")
def real_index(real_service: SageService) -> SageIndex:
    assert real_service.index is not None
    return real_service.index


# --- a tiny mod + SDK, written per test -------------------------------------------------------------
XSD = """\
<?xml version="1.0" encoding="utf-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns="uri:ea.com:eala:asset"
  xmlns:xas="uri:ea.com:eala:asset:schema" targetNamespace="uri:ea.com:eala:asset">
  <xs:include schemaLocation="includes/Ref.xsd"/>
  <xs:complexType name="BaseAssetType">
    <xs:attribute name="id" type="xs:string"/>
  </xs:complexType>
  <xs:complexType name="BaseInheritableAsset">
    <xs:complexContent><xs:extension base="BaseAssetType">
      <xs:attribute name="inheritFrom" type="xs:string"/>
    </xs:extension></xs:complexContent>
  </xs:complexType>
  <xs:complexType name="WeaponTemplate">
    <xs:complexContent><xs:extension base="BaseInheritableAsset">
      <xs:attribute name="FireFX" type="FXListRef"/>
    </xs:extension></xs:complexContent>
  </xs:complexType>
  <xs:complexType name="FXList">
    <xs:complexContent><xs:extension base="BaseInheritableAsset"/></xs:complexContent>
  </xs:complexType>
  <xs:complexType name="Filter">
    <xs:sequence>
      <xs:element name="IncludeThing" type="WeakReference" xas:refType="GameObject" maxOccurs="unbounded"/>
    </xs:sequence>
    <xs:attribute name="id" type="Poid" xas:refType="ObjectFilter"/>
  </xs:complexType>
  <xs:complexType name="WeaponSlot">
    <xs:sequence><xs:element name="Weapon" type="WeaponSlotWeapon" maxOccurs="unbounded"/></xs:sequence>
  </xs:complexType>
  <xs:complexType name="WeaponSlotWeapon">
    <xs:attribute name="Template" type="WeaponRef"/>
  </xs:complexType>
  <xs:complexType name="Behaviors">
    <xs:sequence><xs:element name="WeaponSetUpdate" type="WeaponSetUpdate" minOccurs="0"/></xs:sequence>
  </xs:complexType>
  <xs:complexType name="WeaponSetUpdate">
    <xs:sequence><xs:element name="WeaponSlotHardpoint" type="WeaponSlot" maxOccurs="unbounded"/></xs:sequence>
  </xs:complexType>
  <xs:complexType name="GameObject">
    <xs:complexContent><xs:extension base="BaseInheritableAsset">
      <xs:sequence>
        <xs:element name="Behaviors" type="Behaviors" minOccurs="0"/>
        <xs:element name="Filter" type="Filter" minOccurs="0"/>
      </xs:sequence>
      <xs:attribute name="Upgrades" type="GameObjectRefList"/>
    </xs:extension></xs:complexContent>
  </xs:complexType>
  <xs:element name="AssetDeclaration">
    <xs:complexType><xs:sequence>
      <xs:element name="Includes" minOccurs="0"/>
      <xs:element name="Defines" minOccurs="0"/>
      <xs:choice minOccurs="0" maxOccurs="unbounded">
        <xs:element name="GameObject" type="GameObject"/>
        <xs:element name="WeaponTemplate" type="WeaponTemplate"/>
        <xs:element name="FXList" type="FXList"/>
      </xs:choice>
    </xs:sequence></xs:complexType>
  </xs:element>
</xs:schema>
"""

REF_XSD = """\
<?xml version="1.0" encoding="utf-8"?>
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns="uri:ea.com:eala:asset"
  xmlns:xas="uri:ea.com:eala:asset:schema" targetNamespace="uri:ea.com:eala:asset">
  <xs:simpleType name="AssetReference" xas:isRef="true"><xs:restriction base="xs:string"/></xs:simpleType>
  <xs:simpleType name="WeakReference" xas:isWeakRef="true"><xs:restriction base="xs:string"/></xs:simpleType>
  <xs:simpleType name="Poid" xas:isWeakRef="true"><xs:restriction base="xs:string"/></xs:simpleType>
  <xs:simpleType name="WeaponRef" xas:refType="WeaponTemplate"><xs:restriction base="AssetReference"/></xs:simpleType>
  <xs:simpleType name="FXListRef" xas:refType="FXList"><xs:restriction base="AssetReference"/></xs:simpleType>
  <xs:simpleType name="GameObjectRef" xas:refType="GameObject"><xs:restriction base="AssetReference"/></xs:simpleType>
  <xs:simpleType name="GameObjectRefList"><xs:list itemType="GameObjectRef"/></xs:simpleType>
</xs:schema>
"""


def doc(body: str, includes: str = "", defines: str = "") -> str:
    inc = f"<Includes>{includes}</Includes>" if includes else ""
    dfn = f"<Defines>{defines}</Defines>" if defines else ""
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<AssetDeclaration xmlns="uri:ea.com:eala:asset" '
        f'xmlns:xi="http://www.w3.org/2001/XInclude" xmlns:xai="uri:ea.com:eala:asset:instance">\n'
        f"{inc}{dfn}\n{textwrap.dedent(body)}\n</AssetDeclaration>\n"
    )


@dataclass
class MiniMod:
    root: Path
    sdk: Path
    mod: Path

    def write(self, rel: str, text: str, base: Path | None = None) -> Path:
        path = (base or self.mod) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path


@pytest.fixture
def minimod(tmp_path: Path) -> MiniMod:
    """A mod using all three include kinds, a global stream, a manifest-backed reference and an SDK."""
    sdk = tmp_path / "sdk"
    mod = tmp_path / "Mods" / "MiniMod"
    m = MiniMod(tmp_path, sdk, mod)
    m.write("Schemas/xsd/CnC3Types.xsd", XSD, sdk)
    m.write("Schemas/xsd/Includes/Ref.xsd", REF_XSD, sdk)  # the EA files include `includes/Ref.xsd`
    m.write(
        "SageXml/Static.xml",
        doc(
            '<FXList id="FX_Vanilla"/>\n<GameObject id="BaseUnit"/>',
            '<Include type="instance" source="DATA:GlobalData/GlobalDefines.xml"/>',
        ),
        sdk,
    )
    m.write(
        "SageXml/GlobalData/GlobalDefines.xml", doc("", defines='<Define name="HEALTH" value="100"/>'), sdk
    )
    (sdk / "BuiltMods" / "SageXml").mkdir(parents=True)
    (sdk / "BuiltMods" / "SageXml" / "global.manifest").write_bytes(
        build_manifest([("GameObject:ManifestUnit", "DATA:global.xml")])
    )
    m.write("SageXml/Global.xml", doc('<GameObject id="NeverWalked"/>'), sdk)
    m.write(
        "Data/Mod.xml",
        doc(
            "",
            '<Include type="reference" source="DATA:static.xml"/>'
            '<Include type="reference" source="DATA:global.xml"/>'
            '<Include type="all" source="units\\Tank.xml."/>'
            '<Include type="instance" source="Base/Base.xml"/>'
            '<Include type="all" source="Missing.xml"/>',
        ),
    )
    m.write(
        "Data/Units/Tank.xml",
        doc(
            """\
        <GameObject id="Tank" inheritFrom="BaseUnit" Upgrades="Tank $X =Y">
          <Behaviors>
            <WeaponSetUpdate>
              <WeaponSlotHardpoint><Weapon Template="TankGun"/></WeaponSlotHardpoint>
            </WeaponSetUpdate>
          </Behaviors>
          <Filter id="LocalFilter"><IncludeThing>Tank</IncludeThing></Filter>
        </GameObject>
        <WeaponTemplate id="TankGun" FireFX="FX_Vanilla"/>
        <WeaponTemplate id="TankGunVet" inheritFrom="WeaponTemplate:TankGun" FireFX="$FX"/>""",
            '<Include type="all" source="DATA:GlobalData/GlobalDefines.xml"/>',
            '<Define name="HEALTH" value="200"/><Define name="ARMOR" value="1" override="true"/>',
        ),
    )
    m.write("Data/Base/Base.xml", doc('<GameObject id="InstanceOnly"/>'))
    m.write("Data/AdditionalMaps/MapMetaData_Mini.xml", doc('<GameObject id="GlobalThing"/>'))
    m.write("Data/Unused.xml", doc('<GameObject id="Orphan"/>'))
    return m
