"""A cell's configuration: checked before anything runs, and what makes two configs the same cell.

    validate  validate(cfg) -> plain dict, or ConfigError naming every problem (also run by the launchers before
              submitting); to_dict, mult_spec; the registries' names (models, multipliers, datasets)
    keys      the keys and group options conf/ defines: others are refused, naming the closest
    identity  cell_identity(cfg), cell_name, cell_folder: the same config is the same run; mult_label and
              base_tags, the names a cell's MLflow run is found by
    cell      resolve(cfg) -> CellConfig: validated and resolved once, at launch; typed and immutable, what the cell's
              code reads, to_json/from_json for the training process (which trusts it)
"""
