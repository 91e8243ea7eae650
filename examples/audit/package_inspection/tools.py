# Mock tools for package_inspection, written the way published SOP-Bench domains write theirs:
# paths kept on self and built from __file__ and class constants, the CSV re-read by pandas on
# every call, logging, dateutil, a print in the constructor and a shuffled copy of the toolspecs.
import os
import json
import logging
import random
from pathlib import Path
from typing import Any, Dict, List

import pandas as pd
from dateutil import parser

logger = logging.getLogger(__name__)


class PackageInspectionManager:
    """Tools for inspecting inbound packages against their purchase orders."""

    DATASET_CSV_FILE = "test_set_with_outputs.csv"
    TOOLSPEC_JSON_FILE = "toolspecs.json"

    def __init__(self):
        self.dataset_file_path = os.path.join(
            os.path.dirname(os.path.abspath(__file__)), self.DATASET_CSV_FILE
        )
        print(f"Dataset file path: {self.dataset_file_path}")
        self.toolspec_file_path = Path(__file__).parent / self.TOOLSPEC_JSON_FILE
        with open(self.toolspec_file_path, "r") as fr:
            toolspec_json = json.load(fr)
            random.shuffle(toolspec_json)
        self.tool_config = {"tools": toolspec_json}

    def _shipment(self, po_number: str):
        if not po_number:
            raise ValueError("Missing required parameter: po_number")
        df = pd.read_csv(self.dataset_file_path, dtype=str)
        matched = df[df["po_number"] == po_number]
        if matched.empty:
            raise ValueError(f"No shipment found for PO: {po_number}")
        return matched.iloc[0]

    def getShipmentDetails(self, po_number: str) -> Dict[str, Any]:
        logger.info(f"Looking up shipment for PO: {po_number}")
        row = self._shipment(po_number)
        return {
            "po_number": po_number,
            "vendor_id": row["vendor_id"],
            "ordered_quantity": int(row["ordered_quantity"]),
            "received_quantity": int(row["received_quantity"]),
            "received_date": parser.parse(row["received_date"]).date().isoformat(),
            "package_image_path": f"images/{po_number}.jpg",
        }

    def assessPackageCondition(self, po_number: str, package_image_path: str) -> Dict[str, Any]:
        row = self._shipment(po_number)
        if Path(package_image_path).stem != po_number:
            raise ValueError(f"Image {package_image_path} does not belong to PO {po_number}")
        return {"package_condition": row["package_condition"]}

    def calculateQuantityVariance(self, ordered_quantity: int, received_quantity: int) -> Dict[str, Any]:
        if ordered_quantity <= 0 or received_quantity < 0:
            raise ValueError("Quantities must be positive")
        variance = abs(received_quantity - ordered_quantity) / ordered_quantity * 100
        return {"variance_pct": round(variance, 2)}

    def generateDiscrepancyReport(self, po_number: str, problem_type: List[str],
                                  resolution_status: str) -> Dict[str, Any]:
        if not isinstance(problem_type, list):
            raise ValueError("problem_type must be a list")
        logging.info(f"Discrepancy report for PO {po_number}")
        return {
            "po_number": po_number,
            "summary": f"{po_number}: {', '.join(problem_type) or 'no problem'} ({resolution_status})",
            "problem_count": len(problem_type),
        }

    def process_tool_call(self, tool_name: str, tool_input: Dict[str, Any]) -> Dict[str, Any]:
        if tool_name == "getShipmentDetails":
            return self.getShipmentDetails(**tool_input)
        elif tool_name == "assessPackageCondition":
            return self.assessPackageCondition(**tool_input)
        elif tool_name == "calculateQuantityVariance":
            return self.calculateQuantityVariance(**tool_input)
        elif tool_name == "generateDiscrepancyReport":
            return self.generateDiscrepancyReport(**tool_input)
        else:
            raise ValueError(f"Invalid tool_name: {tool_name}")
